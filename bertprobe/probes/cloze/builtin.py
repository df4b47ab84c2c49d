"""Built-in cloze item sets, written for bertprobe: templates plus filler lists, sampled with a seed.

Ten categories, each yielding at least 20 items. Answers are common single words where possible, so
that every masked LM's vocabulary holds them; a few (units) are multi-token on purpose.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from bertprobe.probes.cloze.items import MASK, ClozeItem

NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
NAMES = ["John", "Mary", "Alice", "Bob", "Tom", "Sarah", "David", "Emma", "James", "Lucy", "Peter", "Anna"]
THINGS = ["apples", "books", "coins", "pencils", "cookies", "marbles", "stamps", "balloons", "cards", "eggs"]

HYPERNYMS = [
    ("robin", "bird"), ("sparrow", "bird"), ("eagle", "bird"), ("salmon", "fish"), ("trout", "fish"),
    ("shark", "fish"), ("oak", "tree"), ("pine", "tree"), ("maple", "tree"), ("rose", "flower"),
    ("tulip", "flower"), ("daisy", "flower"), ("hammer", "tool"), ("wrench", "tool"), ("saw", "tool"),
    ("carrot", "vegetable"), ("potato", "vegetable"), ("apple", "fruit"), ("banana", "fruit"), ("cherry", "fruit"),
    ("dog", "animal"), ("horse", "animal"), ("ant", "insect"), ("bee", "insect"), ("piano", "instrument"),
    ("violin", "instrument"), ("car", "vehicle"), ("truck", "vehicle"), ("shirt", "garment"), ("cow", "animal"),
]
CATEGORY_WORDS = sorted({h for _, h in HYPERNYMS})

ANTONYMS = [
    ("hot", "cold"), ("big", "small"), ("fast", "slow"), ("up", "down"), ("happy", "sad"), ("old", "young"),
    ("tall", "short"), ("light", "dark"), ("open", "closed"), ("rich", "poor"), ("hard", "soft"), ("full", "empty"),
    ("early", "late"), ("wet", "dry"), ("strong", "weak"), ("clean", "dirty"), ("loud", "quiet"), ("thick", "thin"),
    ("first", "last"), ("good", "bad"), ("true", "false"), ("inside", "outside"), ("win", "lose"), ("buy", "sell"),
]

ROLES = [  # agent, verb (past), patient
    ("waitress", "served", "customer"), ("doctor", "examined", "patient"), ("teacher", "taught", "student"),
    ("police", "arrested", "thief"), ("lawyer", "defended", "client"), ("hunter", "shot", "deer"),
    ("cat", "chased", "mouse"), ("farmer", "fed", "cow"), ("pilot", "flew", "plane"), ("chef", "cooked", "meal"),
    ("judge", "sentenced", "criminal"), ("nurse", "helped", "patient"), ("coach", "trained", "player"),
    ("boss", "hired", "worker"), ("author", "wrote", "book"), ("mechanic", "fixed", "car"),
    ("barber", "cut", "hair"), ("king", "ruled", "kingdom"), ("dog", "bit", "mailman"), ("gardener", "watered", "plants"),
    ("reporter", "interviewed", "mayor"), ("shepherd", "guarded", "sheep"),
]

COMPARATIVES = [("taller", "shorter"), ("older", "younger"), ("faster", "slower"), ("heavier", "lighter"),
                ("bigger", "smaller"), ("stronger", "weaker"), ("richer", "poorer")]

UNITS = [
    (f"There are {MASK} days in a week.", "seven", ("five",)),
    (f"There are {MASK} months in a year.", "twelve", ("ten",)),
    (f"There are {MASK} hours in a day.", "twenty", ("twelve",)),
    (f"There are {MASK} minutes in an hour.", "sixty", ("thirty",)),
    (f"There are {MASK} seconds in a minute.", "sixty", ("hundred",)),
    (f"A week has seven {MASK}.", "days", ("hours",)),
    (f"A year has twelve {MASK}.", "months", ("weeks",)),
    (f"An hour has sixty {MASK}.", "minutes", ("seconds",)),
    (f"A day has twenty-four {MASK}.", "hours", ("minutes",)),
    (f"A minute has sixty {MASK}.", "seconds", ("hours",)),
    (f"A century is one hundred {MASK}.", "years", ("days",)),
    (f"A decade is ten {MASK}.", "years", ("months",)),
    (f"A kilometer is one thousand {MASK}.", "meters", ("miles",)),
    (f"A meter is one hundred {MASK}.", "centimeters", ("kilometers",)),
    (f"A kilogram is one thousand {MASK}.", "grams", ("pounds",)),
    (f"A dozen eggs is {MASK} eggs.", "twelve", ("ten",)),
    (f"Water freezes at zero degrees {MASK}.", "celsius", ("fahrenheit",)),
    (f"Monday comes before {MASK}.", "tuesday", ("sunday",)),
    (f"Friday comes after {MASK}.", "thursday", ("saturday",)),
    (f"January comes before {MASK}.", "february", ("december",)),
    (f"December comes after {MASK}.", "november", ("january",)),
    (f"The day after today is {MASK}.", "tomorrow", ("yesterday",)),
    (f"The day before today was {MASK}.", "yesterday", ("tomorrow",)),
]

PROPERTIES = [
    ("The sky is", "blue", "green"), ("Snow is", "white", "black"), ("Grass is", "green", "red"),
    ("Fire is", "hot", "cold"), ("Ice is", "cold", "hot"), ("Sugar is", "sweet", "sour"), ("Lemons are", "sour", "sweet"),
    ("Coal is", "black", "white"), ("Blood is", "red", "blue"), ("A feather is", "light", "heavy"),
    ("An elephant is", "big", "small"), ("A mouse is", "small", "big"), ("Glass is", "fragile", "soft"),
    ("Rocks are", "hard", "soft"), ("Pillows are", "soft", "hard"), ("Honey is", "sweet", "salty"),
    ("The sun is", "bright", "dark"), ("The night is", "dark", "bright"), ("The desert is", "dry", "wet"),
    ("The ocean is", "salty", "sweet"), ("A cheetah is", "fast", "slow"), ("A snail is", "slow", "fast"),
    ("Bananas are", "yellow", "blue"), ("Ravens are", "black", "white"),
]

SHAPES = [("triangle", 3), ("square", 4), ("rectangle", 4), ("pentagon", 5), ("hexagon", 6), ("octagon", 8)]
ALWAYS = ["Fish live in water.", "Birds have feathers.", "Ice is cold.", "Fire is hot.", "Spiders have eight legs.",
          "Dogs are animals.", "The sun rises in the east."]
NEVER = ["Fish live in trees.", "Dogs can fly.", "Cats lay eggs.", "Stones can speak.", "Snakes have legs.",
         "Ice is hot.", "The sun rises in the west."]
# oLMpics "Always-Never" style (Talmor et al. 2020): "A chicken [MASK] has horns." -> never
HAS_ALWAYS = [("chicken", "feathers"), ("fish", "gills"), ("spider", "eight legs"), ("bird", "wings"), ("cow", "four legs"),
              ("snake", "scales"), ("horse", "a tail"), ("bee", "wings"), ("duck", "a beak"), ("cat", "whiskers")]
HAS_NEVER = [("chicken", "horns"), ("fish", "fur"), ("snake", "legs"), ("dog", "feathers"), ("cat", "gills"),
             ("horse", "wings"), ("cow", "feathers"), ("spider", "wings"), ("whale", "legs"), ("rabbit", "horns")]
FREQUENCY = ("always", "never", "sometimes", "often")  # single wordpieces in BERT's and RoBERTa's vocabularies


def _counting(rng: random.Random, n: int) -> list[ClozeItem]:
    items = []
    combos = [(have, give) for have in range(2, 10) for give in range(1, have)]
    rng.shuffle(combos)
    for i, (have, give) in enumerate(combos[:n]):
        thing = rng.choice(THINGS)
        left = have - give
        text = f"If I have {NUMBERS[have]} {thing} and I give {NUMBERS[give]} away, I will have {MASK} {thing} left."
        items.append(ClozeItem(f"counting-{i:02d}", "counting", text, (NUMBERS[left],), (NUMBERS[have],)))
    return items


def _negation(rng: random.Random, n: int) -> list[ClozeItem]:
    items = []
    pairs = HYPERNYMS[:]
    rng.shuffle(pairs)
    for i, (word, hyper) in enumerate(pairs[: (n + 1) // 2]):
        other = rng.choice([c for c in CATEGORY_WORDS if c != hyper])
        art, art_o = ("an" if word[0] in "aeiou" else "a"), ("an" if other[0] in "aeiou" else "a")
        art_h = "an" if hyper[0] in "aeiou" else "a"
        pair = f"negation-{i:02d}"
        items.append(ClozeItem(f"{pair}-aff", "negation", f"{art.capitalize()} {word} is {art_h} {MASK}.", (hyper,),
                               (other,), pair=pair))
        items.append(ClozeItem(f"{pair}-neg", "negation", f"{art.capitalize()} {word} is not {art_o} {MASK}.", (other,),
                               (hyper,), pair=pair, negated=True))
    return items


def _comparison(rng: random.Random, n: int) -> list[ClozeItem]:
    items = []
    for i in range(n):
        a, b = rng.sample(NAMES, 2)
        x, y = rng.sample(range(3, 80), 2)
        more, less = "older", "younger"
        answer, wrong = (more, less) if x > y else (less, more)
        text = f"{a} is {x} years old and {b} is {y} years old, so {a} is {MASK} than {b}."
        items.append(ClozeItem(f"comparison-{i:02d}", "comparison", text, (answer,), (wrong,)))
    return items


def _antonyms(rng: random.Random, n: int) -> list[ClozeItem]:
    pairs = ANTONYMS[:]
    rng.shuffle(pairs)
    items = []
    for i, (a, b) in enumerate(pairs[:n]):
        if rng.random() < 0.5:
            a, b = b, a
        items.append(ClozeItem(f"antonyms-{i:02d}", "antonyms", f"The opposite of {a} is {MASK}.", (b,), (a,)))
    return items


def _quantifiers(rng: random.Random, n: int) -> list[ClozeItem]:
    items = []
    facts = []
    for shape, sides in SHAPES:
        art = "An" if shape[0] in "aeiou" else "A"
        facts.append((f"{art} {shape} {MASK} has {NUMBERS[sides]} sides.", "always", "never"))
        wrong = rng.choice([s for s in range(3, 9) if s != sides])
        facts.append((f"{art} {shape} {MASK} has {NUMBERS[wrong]} sides.", "never", "always"))
    for sentences, answer, wrong in ((ALWAYS, "always", "never"), (NEVER, "never", "always")):
        for sentence in sentences:
            words = sentence.split()
            cut = 2 if words[0] == "The" else 1  # the blank goes after the subject ...
            if words[cut] in ("is", "are", "can"):
                cut += 1  # ... or after a copula or modal: "Ice is always cold", "Dogs can never fly"
            facts.append((" ".join([*words[:cut], MASK, *words[cut:]]), answer, wrong))
    for pairs, answer in ((HAS_ALWAYS, "always"), (HAS_NEVER, "never")):
        for animal, part in pairs:
            facts.append((f"A {animal} {MASK} has {part}.", answer, ""))
    rng.shuffle(facts)
    for i, (text, answer, _) in enumerate(facts[:n]):
        # every other frequency word is a distractor: never vs always, sometimes, often
        items.append(ClozeItem(f"quantifiers-{i:02d}", "quantifiers", text, (answer,),
                               tuple(w for w in FREQUENCY if w != answer)))
    return items


def _taxonomy(rng: random.Random, n: int) -> list[ClozeItem]:
    pairs = HYPERNYMS[:]
    rng.shuffle(pairs)
    items = []
    for i, (word, hyper) in enumerate(pairs[:n]):
        others = tuple(rng.sample([c for c in CATEGORY_WORDS if c != hyper], 3))
        art = "An" if word[0] in "aeiou" else "A"
        items.append(ClozeItem(f"taxonomy-{i:02d}", "taxonomy", f"{art} {word} is a kind of {MASK}.", (hyper,), others))
    return items


def _roles(rng: random.Random, n: int) -> list[ClozeItem]:
    triples = ROLES[:]
    rng.shuffle(triples)
    items = []
    for i, (agent, verb, patient) in enumerate(triples[: (n + 1) // 2]):
        pair = f"roles-{i:02d}"
        items.append(ClozeItem(f"{pair}-a", "roles", f"The {agent} {verb} the {MASK}.", (patient,), (agent,), pair=pair,
                               contrast="roles"))
        items.append(ClozeItem(f"{pair}-b", "roles", f"The {patient} was {verb} by the {MASK}.", (agent,), (patient,),
                               pair=pair, negated=True, contrast="roles"))
    return items


def _transitivity(rng: random.Random, n: int) -> list[ClozeItem]:
    items = []
    for i in range(n):
        a, b, c = rng.sample(NAMES, 3)
        more, less = rng.choice(COMPARATIVES)
        if i % 2 == 0:
            text, answer, wrong = f"{a} is {more} than {b}, and {b} is {more} than {c}, so {a} is {MASK} than {c}.", more, less
        else:
            text, answer, wrong = f"{a} is {more} than {b}, and {b} is {more} than {c}, so {c} is {MASK} than {a}.", less, more
        items.append(ClozeItem(f"transitivity-{i:02d}", "transitivity", text, (answer,), (wrong,)))
    return items


def _units(rng: random.Random, n: int) -> list[ClozeItem]:
    rows = UNITS[:]
    rng.shuffle(rows)
    return [ClozeItem(f"units-{i:02d}", "units", text, (answer,), wrong) for i, (text, answer, wrong) in enumerate(rows[:n])]


def _properties(rng: random.Random, n: int) -> list[ClozeItem]:
    rows = PROPERTIES[:]
    rng.shuffle(rows)
    return [ClozeItem(f"properties-{i:02d}", "properties", f"{subject} {MASK}.", (answer,), (wrong,))
            for i, (subject, answer, wrong) in enumerate(rows[:n])]


CATEGORIES: dict[str, Callable[[random.Random, int], list[ClozeItem]]] = {
    "counting": _counting,
    "negation": _negation,
    "comparison": _comparison,
    "antonyms": _antonyms,
    "quantifiers": _quantifiers,
    "taxonomy": _taxonomy,
    "roles": _roles,
    "transitivity": _transitivity,
    "units": _units,
    "properties": _properties,
}


def builtin_items(seed: int = 0, per_category: int = 20, categories: tuple[str, ...] | None = None) -> list[ClozeItem]:
    """Generate the built-in items; the same seed gives the same items."""
    out: list[ClozeItem] = []
    for name in categories or tuple(CATEGORIES):
        rng = random.Random(f"{seed}-{name}")
        out += CATEGORIES[name](rng, per_category)
    return out
