"""Kubernetes label selectors: parsing both wire forms, matching label sets, printing the canonical string.

Owns: `Selector` (a frozen, hashable conjunction of `Requirement`s) built from
- the JSON form of `metav1.LabelSelector` (`matchLabels` + `matchExpressions` with `In`, `NotIn`, `Exists`,
  `DoesNotExist`), as Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs carry it;
- the string form accepted by `labels.Parse` (`app=web,tier!=db,env in (a,b),!legacy,version`, also `==`,
  `notin`, and the integer comparisons `replicas>2` / `replicas<5`), as the `status.selector` of a scale
  subresource carries it;
- a plain `{key: value}` map (ReplicationController `spec.selector`, CronJob template labels);
plus the label key/value syntax rules that both forms enforce.

"Everything" versus "nothing": an empty selector (`{}` in JSON, `""` as a string) selects **every** pod;
a missing (nil) selector selects **no** pod. vpa uses `Selector.nothing()` wherever upstream falls back to
`labels.Nothing()`: a VPA whose target cannot be read or is not the top-most controller, and a workload
object without a selector. `Selector.from_label_selector(None)` therefore returns `nothing()`.

Deviation from apimachinery, on purpose: `key==value` is stored and printed as `key=value` (the two are the
same requirement, so they compare equal), and the requirements are sorted by key, operator and values so
that the printed form is canonical even when one key carries several requirements.

Must not: know about pods, VPAs or the API; import anything outside the standard library.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final


class SelectorError(ValueError):
    """A selector that Kubernetes would reject; the message names the offending key, value or operator."""


class Operator(enum.StrEnum):
    """A requirement's operator. The first four are the only ones the JSON form allows."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    EQUALS = "Equals"  # string form `key=value` / `key==value`
    NOT_EQUALS = "NotEquals"  # string form `key!=value`
    GREATER_THAN = "GreaterThan"  # string form `key>5`
    LESS_THAN = "LessThan"  # string form `key<5`


_JSON_OPERATORS: Final = {
    op.value: op for op in (Operator.IN, Operator.NOT_IN, Operator.EXISTS, Operator.DOES_NOT_EXIST)
}

# --- label syntax (k8s.io/apimachinery/pkg/util/validation) ----------------------------------------------

_NAME_MAX: Final = 63
_PREFIX_MAX: Final = 253
_NAME_RE: Final = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_INTEGER_RE: Final = re.compile(r"^[+-]?[0-9]+$")


def validate_label_key(key: str) -> None:
    """Raise SelectorError unless `key` is a qualified name: `[prefix/]name` (IsQualifiedName)."""
    if not isinstance(key, str):
        raise SelectorError(f"label key must be a string, got {type(key).__name__}")
    prefix, slash, name = key.rpartition("/")
    if slash and key.count("/") > 1:
        raise SelectorError(f"invalid label key {key!r}: a qualified name must have at most one '/'")
    if slash:
        if not prefix:
            raise SelectorError(f"invalid label key {key!r}: prefix part must be non-empty")
        if len(prefix) > _PREFIX_MAX:
            raise SelectorError(
                f"invalid label key {key!r}: prefix part must be no more than {_PREFIX_MAX} characters"
            )
        if not _DNS1123_SUBDOMAIN_RE.match(prefix):
            raise SelectorError(
                f"invalid label key {key!r}: prefix part must be a lowercase RFC 1123 "
                "subdomain (e.g. 'example.com')"
            )
    if not name:
        raise SelectorError(f"invalid label key {key!r}: name part must be non-empty")
    if len(name) > _NAME_MAX:
        raise SelectorError(
            f"invalid label key {key!r}: name part must be no more than {_NAME_MAX} characters"
        )
    if not _NAME_RE.match(name):
        raise SelectorError(
            f"invalid label key {key!r}: name part must consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )


def validate_label_value(value: str) -> None:
    """Raise SelectorError unless `value` is a valid label value: empty, or a name of ≤ 63 characters."""
    if not isinstance(value, str):
        raise SelectorError(f"label value must be a string, got {type(value).__name__}")
    if value == "":
        return
    if len(value) > _NAME_MAX:
        raise SelectorError(f"invalid label value {value!r}: must be no more than {_NAME_MAX} characters")
    if not _NAME_RE.match(value):
        raise SelectorError(
            f"invalid label value {value!r}: must consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )


# --- requirements -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a selector. `values` is sorted and free of duplicates; build it with `Requirement.of`."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @classmethod
    def of(cls, key: str, operator: Operator, values: Iterable[str] = ()) -> Requirement:
        """Validate and normalise, as `labels.NewRequirement` does."""
        validate_label_key(key)
        unique = tuple(sorted(set(values)))
        if operator in (Operator.IN, Operator.NOT_IN):
            if not unique:
                raise SelectorError(f"key {key!r}: for 'in', 'notin' operators, values set can't be empty")
        elif operator in (Operator.EQUALS, Operator.NOT_EQUALS):
            if len(unique) != 1:
                raise SelectorError(f"key {key!r}: exact-match compatibility requires one single value")
        elif operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            if unique:
                raise SelectorError(f"key {key!r}: values set must be empty for exists and does not exist")
        else:  # GREATER_THAN, LESS_THAN
            if len(unique) != 1:
                raise SelectorError(f"key {key!r}: for 'Gt', 'Lt' operators, exactly one value is required")
            if not _INTEGER_RE.match(unique[0]):
                raise SelectorError(
                    f"key {key!r}: for 'Gt', 'Lt' operators, the value must be an integer, got {unique[0]!r}"
                )
            return cls(key, operator, unique)
        for value in unique:
            validate_label_value(value)
        return cls(key, operator, unique)

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        value = labels.get(self.key)
        if op is Operator.EQUALS or op is Operator.IN:
            return value is not None and value in self.values
        if op is Operator.NOT_EQUALS or op is Operator.NOT_IN:
            return value is None or value not in self.values
        if op is Operator.EXISTS:
            return value is not None
        if op is Operator.DOES_NOT_EXIST:
            return value is None
        if value is None or not _INTEGER_RE.match(value):
            return False
        if op is Operator.GREATER_THAN:
            return int(value) > int(self.values[0])
        return int(value) < int(self.values[0])

    def to_string(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        if op is Operator.EQUALS:
            return f"{self.key}={self.values[0]}"
        if op is Operator.NOT_EQUALS:
            return f"{self.key}!={self.values[0]}"
        if op is Operator.GREATER_THAN:
            return f"{self.key}>{self.values[0]}"
        if op is Operator.LESS_THAN:
            return f"{self.key}<{self.values[0]}"
        word = "in" if op is Operator.IN else "notin"
        return f"{self.key} {word} ({','.join(self.values)})"

    def sort_key(self) -> tuple[str, str, tuple[str, ...]]:
        return (self.key, self.operator.value, self.values)


# --- selectors --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Selector:
    """A conjunction of requirements. No requirements selects everything, unless `selects_nothing` is set.

    Construct through the class methods; they validate and sort, so equal selectors compare and hash equal.
    """

    requirements: tuple[Requirement, ...] = ()
    selects_nothing: bool = False

    @classmethod
    def everything(cls) -> Selector:
        """Matches every label set: the meaning of an empty `LabelSelector` (`{}`) or an empty string."""
        return _EVERYTHING

    @classmethod
    def nothing(cls) -> Selector:
        """Matches no label set: the meaning of a nil selector and of an unreadable VPA target."""
        return _NOTHING

    @classmethod
    def of(cls, requirements: Iterable[Requirement]) -> Selector:
        return cls(tuple(sorted(set(requirements), key=Requirement.sort_key)))

    @classmethod
    def from_match_labels(cls, match_labels: Mapping[str, str]) -> Selector:
        """`{app: web}` → `app=web`: a plain label map as a selector (SelectorFromSet); empty → everything."""
        return cls.of(
            Requirement.of(key, Operator.EQUALS, (_expect_str(value, f"matchLabels[{key!r}]"),))
            for key, value in match_labels.items()
        )

    @classmethod
    def from_label_selector(cls, label_selector: Mapping[str, object] | None) -> Selector:
        """The JSON form of `metav1.LabelSelector`, as `LabelSelectorAsSelector` reads it.

        None → nothing(); `{}` (or both parts empty) → everything(). Raises SelectorError naming the problem.
        """
        if label_selector is None:
            return cls.nothing()
        if not isinstance(label_selector, Mapping):
            raise SelectorError(f"label selector must be an object, got {type(label_selector).__name__}")
        match_labels = label_selector.get("matchLabels") or {}
        match_expressions = label_selector.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping):
            raise SelectorError(f"matchLabels must be an object, got {type(match_labels).__name__}")
        if not isinstance(match_expressions, list):
            raise SelectorError(f"matchExpressions must be a list, got {type(match_expressions).__name__}")
        requirements: list[Requirement] = []
        for key, value in match_labels.items():
            requirements.append(
                Requirement.of(key, Operator.EQUALS, (_expect_str(value, f"matchLabels[{key!r}]"),))
            )
        for index, expression in enumerate(match_expressions):
            where = f"matchExpressions[{index}]"
            if not isinstance(expression, Mapping):
                raise SelectorError(f"{where} must be an object, got {type(expression).__name__}")
            key = _expect_str(expression.get("key"), f"{where}.key")
            operator_text = expression.get("operator")
            operator = _JSON_OPERATORS.get(operator_text) if isinstance(operator_text, str) else None
            if operator is None:
                raise SelectorError(
                    f"{where}.operator: {operator_text!r} is not a valid label selector "
                    "operator (expected one of In, NotIn, Exists, DoesNotExist)"
                )
            raw_values = expression.get("values") or []
            if not isinstance(raw_values, list):
                raise SelectorError(f"{where}.values must be a list, got {type(raw_values).__name__}")
            values = [_expect_str(v, f"{where}.values[{i}]") for i, v in enumerate(raw_values)]
            try:
                requirements.append(Requirement.of(key, operator, values))
            except SelectorError as err:
                raise SelectorError(f"{where}: {err}") from err
        return cls.of(requirements)

    @classmethod
    def parse(cls, text: str) -> Selector:
        """The string form, as `labels.Parse` reads it (`status.selector` of a scale subresource).

        `""` → everything(). Raises SelectorError naming the position and what was expected.
        """
        if not isinstance(text, str):
            raise SelectorError(f"selector must be a string, got {type(text).__name__}")
        return cls.of(_Parser(text).parse())

    # --- queries ---------------------------------------------------------------------------------------

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.selects_nothing:
            return False
        for requirement in self.requirements:  # noqa: SIM110 - hot path, a plain loop beats all(genexpr)
            if not requirement.matches(labels):
                return False
        return True

    def index_terms(self) -> tuple[tuple[str, str], ...] | None:
        """Label pairs at least one of which every matching label set holds, so that selectors can be
        indexed by label: the pairs of the first `=` or `in` requirement; `()` for nothing() (no label set
        matches); None when no requirement pins a value (everything(), only `!=`, `notin`, `exists`...)."""
        if self.selects_nothing:
            return ()
        for requirement in self.requirements:
            if requirement.operator is Operator.EQUALS or requirement.operator is Operator.IN:
                return tuple((requirement.key, value) for value in requirement.values)
        return None

    def is_everything(self) -> bool:
        return not self.selects_nothing and not self.requirements

    def is_nothing(self) -> bool:
        return self.selects_nothing

    def to_string(self) -> str:
        """Canonical string form: requirements sorted by key and joined by commas.

        Both everything() and nothing() print as "" (as apimachinery does); `is_nothing()` tells them apart.
        """
        return ",".join(requirement.to_string() for requirement in self.requirements)

    def __str__(self) -> str:
        return self.to_string()


_EVERYTHING: Final = Selector()
_NOTHING: Final = Selector((), selects_nothing=True)


def _expect_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise SelectorError(f"{where} must be a string, got {type(value).__name__}")
    return value


# --- the string form --------------------------------------------------------------------------------------

_TOKEN_RE: Final = re.compile(r"\s*(?:(==|!=|=|!|\(|\)|,|<|>)|([^\s=!(),<>]+))")


class _Parser:
    """A recursive-descent parser for the `labels.Parse` grammar.

    selector    := requirement ("," requirement)*
    requirement := "!" KEY
                 | KEY [ ("=" | "==" | "!=") VALUE? | ("in" | "notin") "(" values ")" | (">" | "<") INT ]
    values      := VALUE? ("," VALUE?)*          (empty entries mean the empty value, as upstream)
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens: list[tuple[str, str, int]] = []  # (kind, text, position); kind "op" or "id"
        position = 0
        while position < len(text):
            match = _TOKEN_RE.match(text, position)
            if match is None or match.end() == position:
                break  # only trailing whitespace is left
            operator, identifier = match.groups()
            if operator is None and identifier is None:
                break
            start = match.start(1) if operator is not None else match.start(2)
            kind, lexeme = ("op", operator) if operator is not None else ("id", identifier)
            self._tokens.append((kind, lexeme, start))
            position = match.end()
        self._index = 0

    def _peek(self) -> tuple[str, str, int] | None:
        return self._tokens[self._index] if self._index < len(self._tokens) else None

    def _next(self, expected: str) -> tuple[str, str, int]:
        token = self._peek()
        if token is None:
            raise SelectorError(f"selector {self._text!r}: found end of string, expected {expected}")
        self._index += 1
        return token

    def _fail(self, token: tuple[str, str, int], expected: str) -> SelectorError:
        return SelectorError(
            f"selector {self._text!r}: found {token[1]!r} at position {token[2]}, expected {expected}"
        )

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        if self._peek() is None:
            return requirements
        while True:
            requirements.append(self._requirement())
            token = self._peek()
            if token is None:
                return requirements
            if token[1] != ",":
                raise self._fail(token, "',' or end of string")
            self._index += 1

    def _key(self) -> str:
        token = self._next("a label key")
        if token[0] != "id" or token[1] in ("in", "notin"):
            raise self._fail(token, "a label key")
        return token[1]

    def _requirement(self) -> Requirement:
        first = self._peek()
        if first is not None and first[1] == "!":
            self._index += 1
            return self._make(self._key(), Operator.DOES_NOT_EXIST, ())
        key = self._key()
        token = self._peek()
        if token is None or token[1] == ",":
            return self._make(key, Operator.EXISTS, ())
        self._index += 1
        if token[1] in ("=", "==", "!="):
            operator = Operator.NOT_EQUALS if token[1] == "!=" else Operator.EQUALS
            return self._make(key, operator, (self._optional_value(),))
        if token[1] in (">", "<"):
            operator = Operator.GREATER_THAN if token[1] == ">" else Operator.LESS_THAN
            value = self._next("an integer value")
            if value[0] != "id":
                raise self._fail(value, "an integer value")
            return self._make(key, operator, (value[1],))
        if token[0] == "id" and token[1] in ("in", "notin"):
            operator = Operator.IN if token[1] == "in" else Operator.NOT_IN
            return self._make(key, operator, self._value_set())
        raise self._fail(token, "one of '=', '==', '!=', 'in', 'notin', '>', '<', ',' or end of string")

    def _optional_value(self) -> str:
        token = self._peek()
        if token is None or token[1] == ",":
            return ""  # `key=` selects the empty value
        self._index += 1
        if token[0] != "id":
            raise self._fail(token, "a label value")
        return token[1]

    def _value_set(self) -> tuple[str, ...]:
        opening = self._next("'('")
        if opening[1] != "(":
            raise self._fail(opening, "'('")
        values: list[str] = []
        current: str | None = None
        while True:
            token = self._next("a value, ',' or ')'")
            if token[0] == "id":
                if current is not None:
                    raise self._fail(token, "',' or ')'")
                current = token[1]
            elif token[1] == ",":
                values.append(current or "")
                current = None
            elif token[1] == ")":
                values.append(current or "")
                return tuple(values)
            else:
                raise self._fail(token, "a value, ',' or ')'")

    def _make(self, key: str, operator: Operator, values: tuple[str, ...]) -> Requirement:
        try:
            return Requirement.of(key, operator, values)
        except SelectorError as err:
            raise SelectorError(f"selector {self._text!r}: {err}") from err
