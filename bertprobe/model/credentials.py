"""Which of a served model's request headers carry credentials, and which words of their values are the secret.

A header is a credential when its name is one of ``SECRET_HEADERS``, one of its parts (split at ``-``, ``_``, ``.``)
is one of ``CREDENTIAL_WORDS``, or it holds one of ``CREDENTIAL_PHRASES`` (case-insensitive): ``Authorization``,
``X-Auth-Token``, ``X-Goog-Api-Key``, ``Ocp-Apim-Subscription-Key``, ``X-Amz-Security-Token``, ``X-Session-Id``...
(not ``X-Tokenizer-Version``, ``X-Author`` or ``X-Sticky-Session``). A credential's value is written as ``${VAR}`` in
a suite, never enters a cache key or a served model's identity, and each of its words but an auth scheme's name
(``Bearer``) is scrubbed from messages. A routing header named with such a part (``x-routing-key``) is a credential
too: it is then left out of the cache key, so name a header that routes without these words. Imports nothing but
``re``.
"""

from __future__ import annotations

import re

SECRET_HEADERS = ("authorization", "x-api-key", "api-key", "proxy-authorization", "cookie")
CREDENTIAL_WORDS = ("auth", "token", "key", "secret", "password", "passwd", "cookie", "signature", "credential",
                    "credentials", "apikey", "authtoken", "accesstoken", "authorization", "jwt", "bearer")
CREDENTIAL_PHRASES = ("session-id", "session_id", "sessionid")
# a header name's parts (split at "-", "_" and ".") are compared with the words, so X-Tokenizer-Version, X-Author and
# X-Sticky-Session route and stay in the cache key, while X-Auth-Token and X-Goog-Api-Key are credentials
AUTH_SCHEMES = frozenset({"bearer", "basic", "digest", "token", "apikey", "api-key", "key", "negotiate", "ntlm",
                          "dpop", "hoba", "mutual", "sharedkey", "aws4-hmac-sha256"})
MIN_SECRET_WORD = 4  # a credential's words shorter than this are not scrubbed alone (they would mangle messages)


def is_credential_header(name: str) -> bool:
    """Whether header ``name`` carries a credential (``SECRET_HEADERS``, or a name holding a ``CREDENTIAL_WORDS``)."""
    lower = str(name).strip().lower()
    return (lower in SECRET_HEADERS or any(part in CREDENTIAL_WORDS for part in re.split(r"[-_.\s]+", lower))
            or any(phrase in lower for phrase in CREDENTIAL_PHRASES))


def credential_words(value: str) -> list[str]:
    """The words of a credential's value to scrub on their own: every one but an auth scheme's name (``Bearer``)
    and words shorter than ``MIN_SECRET_WORD``; ``Credential=...,`` pairs are split at commas and blanks."""
    words = str(value).replace(",", " ").split()
    return [w for w in words if len(w) >= MIN_SECRET_WORD and w.lower() not in AUTH_SCHEMES]
