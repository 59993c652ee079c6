"""Detectors: what sensitive data looks like, and how to mask and check it.

A `Detector` is a regular expression plus the facts the scanner needs to use
it on streamed text: the longest match it can make (`max_length`) and a
pattern that accepts every beginning of a match (`partial`). Checks that a
regular expression cannot express (Luhn, IBAN mod-97, SSN ranges) live in
`refine`, which may also shorten a match to its valid part.

The built-in patterns use explicit ASCII classes (never backslash-d, -w or -s),
bound every repetition, and look ahead at most two characters, all of whose
characters belong to the detector's own alphabet. Each begins with a literal
or a character class, its lookbehind coming after those first characters
(`sk-(?<![...]sk-)`, not `(?<![...])sk-`), so that `re` jumps straight to
the places a match can start instead of trying every position; and each
names the strings every match contains (`required`), so that a text holding
none of them is not searched at all. `test_guardrail_corpus.py` checks
`max_length`, `partial` and `required` against every sample in the corpus.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemill.agents.guardrails._base import ViolationKind

__all__ = ["BUILTIN_DETECTORS", "Detector", "builtin_categories", "prefix_pattern"]


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of sensitive data: a pattern, a placeholder and a mask.

    Pass detectors to `RuleGuardrail(detectors=...)` for patterns that need
    more than a regular expression; `RuleGuardrail(patterns=...)` builds them
    from plain expressions.

    Streaming relies on two promises a detector makes, so keep them true: no
    match is longer than `max_length` characters, and every beginning of a
    match (plus up to two characters a lookahead inspects) fully matches
    `partial`. Leave `partial` unset when unsure; the stream guard then holds
    back `max_length` characters, which is always safe.

    Examples:
        >>> import re
        >>> order = Detector("order_id", re.compile(r"ORD-[0-9]{8}"), max_length=12)
        >>> order.placeholder
        '[ORDER_ID]'
    """

    category: str
    """The name violations carry (`email`, `order_id`)."""
    pattern: re.Pattern[str]
    """What a match looks like. Bound its repetitions: `{1,64}`, not `+`."""
    kind: ViolationKind = "custom"
    """The family its violations carry: `pii`, `secret` or `custom`."""
    placeholder: str = ""
    """What redaction puts in place of a match; `[CATEGORY]` by default."""
    max_length: int = 200
    """The longest text a match can span."""
    partial: re.Pattern[str] | None = None
    """Accepts (fully) every prefix of a possible match; None accepts everything."""
    refine: Callable[[str], int] | None = None
    """Given a match, the length of its valid part, or 0 to reject it."""
    mask: Callable[[str], str] | None = None
    """Renders a match for logs without revealing it; keeps two characters by default."""
    required: tuple[str, ...] = ()
    """Strings of which every match contains at least one (`("@",)` for an email).

    A text that holds none of them is not searched, which makes clean text
    cheap to scan. Empty (the default) always searches; leave it so when unsure,
    since a wrong entry hides matches."""
    partial_tail: re.Pattern[str] | None = field(default=None, init=False, repr=False)
    """`partial` anchored at the end of a text; derived from `partial`, not given."""
    required_any: re.Pattern[str] | None = field(default=None, init=False, repr=False)
    """A pattern that finds any of `required`; derived from `required`, not given."""

    def __post_init__(self) -> None:
        if not self.placeholder:
            object.__setattr__(self, "placeholder", f"[{self.category.upper()}]")
        if self.partial is not None:
            # `partial` must match a whole suffix of the text: search for it anchored at the end.
            tail = re.compile(f"(?:{self.partial.pattern})\\Z", self.partial.flags)
            object.__setattr__(self, "partial_tail", tail)
        if self.required:
            # One search for any of them: `re` turns single characters into a class.
            needles = sorted(self.required, key=len, reverse=True)
            gate = re.compile("|".join(re.escape(needle) for needle in needles))
            object.__setattr__(self, "required_any", gate)

    def masked(self, text: str) -> str:
        """Return `text` masked for display; never the text itself."""
        if self.mask is not None:
            return self.mask(text)
        return (text[:2] if len(text) > 8 else "") + "****"


# -- masks ----------------------------------------------------------------------------


def _mask_digits(keep: int) -> Callable[[str], str]:
    """Star every digit but the last `keep`, leaving separators in place."""

    def mask(text: str) -> str:
        total = sum(ch.isdigit() for ch in text)
        seen = 0
        out = []
        for ch in text:
            if ch.isdigit():
                seen += 1
                out.append(ch if seen > total - keep else "*")
            else:
                out.append(ch)
        return "".join(out)

    return mask


def _mask_email(text: str) -> str:
    local, _, domain = text.partition("@")
    return f"{local[:1]}***@{domain[:1]}***.{domain.rsplit('.', 1)[-1]}"


def _mask_iban(text: str) -> str:
    alnum = sum(ch.isalnum() for ch in text)
    seen = 0
    out = []
    for ch in text:
        if ch.isalnum():
            seen += 1
            out.append(ch if seen <= 2 or seen > alnum - 2 else "*")
        else:
            out.append(ch)
    return "".join(out)


def _mask_ipv4(text: str) -> str:
    return text.split(".", 1)[0] + ".***.***.***"


def _mask_ipv6(text: str) -> str:
    head = text.split(":", 1)[0]
    return f"{head}:****" if head else "::****"


def _mask_keep(prefix: Callable[[str], str]) -> Callable[[str], str]:
    """Keep a non-secret marker (a vendor prefix, a PEM header), star the rest."""
    return lambda text: prefix(text) + "****"


def _pem_header(text: str) -> str:
    """`-----BEGIN RSA PRIVATE KEY-----`: the header line, never the body."""
    return text[: text.find("-----", 5) + 5]


def _known_prefix(*markers: str) -> Callable[[str], str]:
    """The first of `markers` the text starts with: vendor prefixes are not secret."""

    def prefix(text: str) -> str:
        return next((marker for marker in markers if text.startswith(marker)), "")

    return prefix


# -- checks ---------------------------------------------------------------------------


def _whole(check: Callable[[str], bool]) -> Callable[[str], int]:
    """A refine that keeps the whole match when `check` accepts it."""
    return lambda text: len(text) if check(text) else 0


def _luhn(digits: str) -> bool:
    total = 0
    for index, ch in enumerate(reversed(digits)):
        value = ord(ch) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _issuer_fits(digits: str) -> bool:
    """Whether the number starts like a payment card of its length (IIN ranges)."""
    n = len(digits)
    two, four = int(digits[:2]), int(digits[:4])
    if digits[0] == "4":  # Visa
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:  # Mastercard
        return n == 16
    if two in (34, 37):  # American Express
        return n == 15
    if 2200 <= four <= 2204:  # Mir
        return n == 16
    if 3528 <= four <= 3589:  # JCB
        return 16 <= n <= 19
    if 300 <= int(digits[:3]) <= 305 or two in (36, 38, 39):  # Diners Club
        return 14 <= n <= 19
    if digits[0] == "6" or two in (50, 56, 57, 58):  # Discover, UnionPay, Maestro
        return 13 <= n <= 19
    return False


def _card_fits(text: str) -> bool:
    digits = text.replace(" ", "").replace("-", "")
    if not 13 <= len(digits) <= 19:
        return False
    groups = re.split("[ -]", text)
    # Printed cards group digits in fours (Amex 4-6-5, Diners 4-6-4); phone numbers
    # and tables of figures do not.
    if len(groups) > 1 and not all(3 <= len(group) <= 6 for group in groups):
        return False
    return _issuer_fits(digits) and _luhn(digits)


def _refine_card(text: str) -> int:
    """The longest prefix, cut at a separator, that is a valid card number.

    A card written before another figure (`4111 1111 1111 1111 2027`) still counts.
    """
    cuts = [len(text)] + [i for i in range(len(text) - 1, 0, -1) if text[i] in " -"]
    for cut in cuts:
        if _card_fits(text[:cut]):
            return cut
    return 0


# ISO 13616 registry: IBAN length by country.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
    "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
    "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
    "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
    "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
    "YE": 30,
}  # fmt: skip


def _mod97(compact: str) -> bool:
    rotated = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rotated)) % 97 == 1


def _refine_iban(text: str) -> int:
    """Cut the match at its country's IBAN length, then check the mod-97 digits."""
    length = _IBAN_LENGTHS.get(text[:2])
    if length is None:
        return 0
    count = 0
    for index, ch in enumerate(text):
        if ch != " ":
            count += 1
            if count == length:
                end = index + 1
                break
    else:
        return 0
    if end < len(text) and text[end] != " ":
        return 0
    return end if _mod97(text[:end].replace(" ", "")) else 0


def _ssn_fits(text: str) -> bool:
    area, group, serial = text[:3], text[4:6], text[7:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _phone_fits(text: str) -> bool:
    return 8 <= sum(ch.isdigit() for ch in text) <= 15


# File extensions that follow an `@` in image names (`logo@2x.png`), not domains.
_NOT_TLDS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "tif", "tiff"})


def _email_fits(text: str) -> bool:
    local, _, domain = text.partition("@")
    if local.endswith(".") or ".." in local:
        return False
    return domain.rsplit(".", 1)[-1].lower() not in _NOT_TLDS


def _ipv4_fits(text: str) -> bool:
    # 0.x (this network), 127.x (loopback) and 255.x (netmasks, broadcast) identify nobody.
    return text.split(".", 1)[0] not in ("0", "127", "255")


def _refine_ipv6(text: str) -> int:
    candidate = text.rstrip(".")
    if candidate.endswith(":") and not candidate.endswith("::"):
        candidate = candidate[:-1]
    try:
        address = ipaddress.IPv6Address(candidate)
    except ValueError:
        return 0
    if address.is_loopback or address.is_unspecified:
        return 0
    # `a::b` or `1:2:3:4:5:6:7:8` appear in code and prose; real addresses have a
    # group of three or more hex digits.
    groups = candidate.replace(".", ":").split(":")
    if max(len(group) for group in groups) < 3:
        return 0
    return len(candidate)


def _mixed(text: str) -> bool:
    """Whether a token looks random (upper, lower and a digit), unlike prose or slugs."""
    has_upper = has_lower = has_digit = False
    for ch in text:
        if "A" <= ch <= "Z":
            has_upper = True
        elif "a" <= ch <= "z":
            has_lower = True
        elif "0" <= ch <= "9":
            has_digit = True
    return has_upper and has_lower and has_digit


def _has_digit_and_letter(text: str) -> bool:
    return any(ch.isdigit() for ch in text) and any(ch.isalpha() for ch in text)


def _refine_bearer(text: str) -> int:
    candidate = text.rstrip(".")
    token = candidate.split()[-1]
    return len(candidate) if len(token) >= 20 and _has_digit_and_letter(token) else 0


# -- patterns -------------------------------------------------------------------------


def prefix_pattern(literal: str, rest: str = "") -> str:
    """A pattern accepting every prefix of `literal`, then, once it is complete, `rest`."""
    tail = f"(?:{rest})?" if rest else ""
    for ch in reversed(literal):
        tail = f"(?:{re.escape(ch)}{tail})?"
    return tail[3:-2]  # the outermost group is not optional: at least one character


def _detector(
    category: str,
    pattern: str,
    *,
    kind: ViolationKind,
    max_length: int,
    partial: str,
    placeholder: str = "",
    refine: Callable[[str], int] | None = None,
    mask: Callable[[str], str] | None = None,
    required: tuple[str, ...] = (),
) -> Detector:
    return Detector(
        category=category,
        pattern=re.compile(pattern, re.VERBOSE),
        kind=kind,
        placeholder=placeholder,
        max_length=max_length,
        partial=re.compile(partial),
        refine=refine,
        mask=mask,
        required=required,
    )


_TOKEN = "A-Za-z0-9_-"  # base64url, the alphabet of most API keys
_DIGITS = tuple("0123456789")
_PEM_BODY = r"A-Za-z0-9+/=\ \t\r\n:,-"  # base64 lines and the old encrypted-key headers

_SECRETS = (
    _detector(
        "private_key",
        rf"""-----BEGIN\ (?:[A-Z0-9]{{1,10}}\ ){{0,3}}PRIVATE\ KEY-----
        (?:[{_PEM_BODY}]{{0,8000}}?-----END\ (?:[A-Z0-9]{{1,10}}\ ){{0,3}}PRIVATE\ KEY-----
          |(?:\r?\n[A-Za-z0-9+/=]{{1,80}}){{0,100}})""",
        kind="secret",
        max_length=8300,
        partial=prefix_pattern("-----BEGIN ", f"[{_PEM_BODY}]{{0,8300}}"),
        required=("-----BEGIN ",),
        mask=_mask_keep(_pem_header),
    ),
    _detector(
        "jwt",
        rf"""eyJ(?<![{_TOKEN}]eyJ)[{_TOKEN}]{{5,500}}\.ey[{_TOKEN}]{{5,4000}}\.[{_TOKEN}]{{0,700}}
        (?![{_TOKEN}])""",
        kind="secret",
        max_length=5210,
        partial=prefix_pattern(
            "eyJ",
            rf"[{_TOKEN}]{{0,500}}(?:\.(?:e(?:y[{_TOKEN}]{{0,4000}}(?:\.[{_TOKEN}]{{0,701}})?)?)?)?",
        ),
        mask=lambda text: "eyJ****",
        required=("eyJ",),
    ),
    _detector(
        "bearer_token",
        r"""(?<![A-Za-z0-9_-])(?:[Bb]earer|BEARER)[\ \t]{1,4}[A-Za-z0-9._~+/=-]{20,1024}
        (?![A-Za-z0-9._~+/=-])""",
        kind="secret",
        max_length=1040,
        partial="(?i:" + prefix_pattern("bearer", r"[ \t]{1,4}[A-Za-z0-9._~+/=-]{0,1025}") + ")",
        refine=_refine_bearer,
        mask=_mask_keep(lambda text: text.split()[0] + " "),
        required=("Bearer", "bearer", "BEARER"),
    ),
    _detector(
        "anthropic_api_key",
        rf"sk-ant-(?<![{_TOKEN}]sk-ant-)[{_TOKEN}]{{20,200}}(?![{_TOKEN}])",
        kind="secret",
        max_length=210,
        partial=prefix_pattern("sk-ant-", f"[{_TOKEN}]{{0,201}}"),
        refine=_whole(lambda text: _mixed(text[7:])),
        mask=lambda text: "sk-ant-****",
        required=("sk-ant-",),
    ),
    _detector(
        "openai_api_key",
        rf"sk-(?<![{_TOKEN}]sk-)[{_TOKEN}]{{20,200}}(?![{_TOKEN}])",
        kind="secret",
        max_length=205,
        partial=prefix_pattern("sk-", f"[{_TOKEN}]{{0,201}}"),
        refine=_whole(lambda text: _mixed(text[3:])),
        mask=_mask_keep(_known_prefix("sk-proj-", "sk-svcacct-", "sk-admin-", "sk-")),
        required=("sk-",),
    ),
    _detector(
        "aws_access_key_id",
        r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
        kind="secret",
        max_length=20,
        partial=prefix_pattern("AKIA", "[0-9A-Z]{0,16}")
        + "|"
        + prefix_pattern("ASIA", "[0-9A-Z]{0,16}"),
        mask=_mask_keep(lambda text: text[:4]),
        required=("AKIA", "ASIA"),
    ),
    _detector(
        "github_token",
        r"""g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{22,244})
        (?![A-Za-z0-9_])""",
        kind="secret",
        max_length=260,
        partial=prefix_pattern("gh", "[pousr](?:_[A-Za-z0-9]{0,251})?")
        + "|"
        + prefix_pattern("github_pat_", "[A-Za-z0-9_]{0,244}"),
        mask=_mask_keep(_known_prefix("github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
        required=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _detector(
        "slack_token",
        r"xox(?<![A-Za-z0-9_-]xox)[abeoprs]-[A-Za-z0-9-]{10,250}(?![A-Za-z0-9_-])",
        kind="secret",
        max_length=260,
        partial=prefix_pattern("xox", "[abeoprs](?:-[A-Za-z0-9-]{0,251})?"),
        refine=_whole(lambda text: any(ch.isdigit() for ch in text[5:])),
        mask=_mask_keep(lambda text: text[:5]),
        required=("xox",),
    ),
    _detector(
        "google_api_key",
        rf"AIza(?<![{_TOKEN}]AIza)[{_TOKEN}]{{35}}(?![{_TOKEN}])",
        kind="secret",
        max_length=40,
        partial=prefix_pattern("AIza", f"[{_TOKEN}]{{0,36}}"),
        mask=lambda text: "AIza****",
        required=("AIza",),
    ),
)

_IPV4_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"

_PII = (
    _detector(
        "credit_card",
        r"[0-9](?<![0-9A-Za-z_][0-9])(?:[\ -]?[0-9]){12,18}(?![0-9])",
        kind="pii",
        max_length=40,
        partial=r"[0-9][0-9 -]{0,40}",
        refine=_refine_card,
        mask=_mask_digits(4),
        required=_DIGITS,
    ),
    _detector(
        "iban",
        r"""[A-Z](?<![A-Za-z0-9][A-Z])[A-Z][0-9]{2}
        (?:[A-Z0-9]{11,30}|(?:\ [A-Z0-9]{4}){2,7}(?:\ [A-Z0-9]{1,4})?)
        (?![A-Za-z0-9])""",
        kind="pii",
        max_length=45,
        partial=r"[A-Z](?:[A-Z](?:[0-9](?:[0-9][A-Z0-9 ]{0,42})?)?)?",
        refine=_refine_iban,
        mask=_mask_iban,
        required=_DIGITS,
    ),
    _detector(
        "ssn",
        r"[0-9](?<![0-9A-Za-z_.-][0-9])[0-9]{2}([\ -])[0-9]{2}\1[0-9]{4}(?![0-9A-Za-z_]|[.-][0-9])",
        kind="pii",
        max_length=12,
        partial=r"[0-9][0-9 .-]{0,12}",
        refine=_whole(_ssn_fits),
        mask=_mask_digits(2),
        required=_DIGITS,
    ),
    _detector(
        "email",
        r"""[A-Za-z0-9](?<![A-Za-z0-9._%+@-][A-Za-z0-9])[A-Za-z0-9._%+-]{0,63}
        @(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,4}[A-Za-z]{2,24}
        (?![A-Za-z0-9_%+@-]|\.[A-Za-z0-9])""",
        kind="pii",
        max_length=350,
        partial=r"[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}(?:@[A-Za-z0-9.-]{0,290})?",
        refine=_whole(_email_fits),
        mask=_mask_email,
        required=("@",),
    ),
    _detector(
        "phone",
        # International (`+44 20 7946 0958`, `+14155550100`) or North American
        # (`(415) 555-0100`, `415.555.0100`, `1-800-555-0199`). Bare digit runs are
        # not phone numbers: they are ids, amounts and timestamps.
        # Both start with one character class; which one it was is read back by a
        # lookbehind, so that `re` only tries the places that have one of them.
        r"""[+(1-9]
        (?:(?<=\+)(?<![0-9A-Za-z_+]\+)[1-9][0-9]{0,14}
            (?:[\ .-]?\([0-9]{1,4}\)[0-9]{0,8}|[\ .-][0-9]{1,8}){0,6}
          |(?<![0-9A-Za-z_+.-][(1-9])
            (?:(?<=1)[\ .-]?(?:\([2-9][0-9]{2}\)\ ?|[2-9][0-9]{2}[\ .-])
              |(?<=\()[2-9][0-9]{2}\)\ ?
              |(?<=[2-9])[0-9]{2}[\ .-])
            [2-9][0-9]{2}[\ .-][0-9]{4})
        (?![0-9]|[.-][0-9])""",
        kind="pii",
        max_length=110,
        partial=r"\+(?:[1-9][0-9 ().-]{0,110})?|[0-9(][0-9 ().-]{0,20}",
        refine=_whole(_phone_fits),
        mask=_mask_digits(2),
        required=_DIGITS,
    ),
    _detector(
        "ipv6",
        r"(?<![0-9A-Za-z_:.])(?=[0-9A-Fa-f]{0,4}:)[0-9A-Fa-f:.]{2,45}(?![0-9A-Za-z_:.])",
        kind="pii",
        placeholder="[IP_ADDRESS]",
        max_length=46,
        partial=r"[0-9A-Fa-f:][0-9A-Fa-f:.]{0,46}",
        refine=_refine_ipv6,
        mask=_mask_ipv6,
        required=(":",),
    ),
    _detector(
        "ipv4",
        rf"(?<![0-9A-Za-z_.]){_IPV4_OCTET}(?:\.{_IPV4_OCTET}){{3}}(?![0-9]|\.[0-9])",
        kind="pii",
        placeholder="[IP_ADDRESS]",
        max_length=16,
        partial=r"[0-9][0-9.]{0,16}",
        refine=_whole(_ipv4_fits),
        mask=_mask_ipv4,
        required=_DIGITS,
    ),
)

BUILTIN_DETECTORS: tuple[Detector, ...] = _SECRETS + _PII
"""Every built-in detector, in priority order: when two match at the same
place with the same length, the earlier one names the violation."""


def builtin_categories() -> dict[str, ViolationKind]:
    """Return each built-in category with its family (`pii` or `secret`)."""
    return {detector.category: detector.kind for detector in BUILTIN_DETECTORS}
