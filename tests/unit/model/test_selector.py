"""Label selectors: both wire forms, matching, canonical printing, and the errors Kubernetes would raise."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vpa.model.selector import Operator, Requirement, Selector, SelectorError

WEB = {"app": "web", "tier": "frontend", "env": "prod", "version": "3"}

# (string form, labels, expected match, canonical string)
STRING_CASES = [
    ("app=web", WEB, True, "app=web"),
    ("app==web", WEB, True, "app=web"),
    ("app=db", WEB, False, "app=db"),
    ("app!=db", WEB, True, "app!=db"),
    ("missing!=x", WEB, True, "missing!=x"),
    ("app!=web", WEB, False, "app!=web"),
    ("env in (prod,staging)", WEB, True, "env in (prod,staging)"),
    ("env in (staging, prod)", WEB, True, "env in (prod,staging)"),
    ("env in (staging)", WEB, False, "env in (staging)"),
    ("missing in (a)", WEB, False, "missing in (a)"),
    ("env notin (prod)", WEB, False, "env notin (prod)"),
    ("env notin (dev,qa)", WEB, True, "env notin (dev,qa)"),
    ("missing notin (a)", WEB, True, "missing notin (a)"),
    ("version", WEB, True, "version"),
    ("legacy", WEB, False, "legacy"),
    ("!legacy", WEB, True, "!legacy"),
    ("!app", WEB, False, "!app"),
    ("version>2", WEB, True, "version>2"),
    ("version<3", WEB, False, "version<3"),
    ("app>2", WEB, False, "app>2"),
    ("app=", {"app": ""}, True, "app="),
    ("app=", WEB, False, "app="),
    ("app in ()", {"app": ""}, True, "app in ()"),
    (
        "app=web,tier!=db,env in (a,b),!legacy,version",
        WEB,
        False,
        "app=web,env in (a,b),!legacy,tier!=db,version",
    ),
    (
        "app=web,tier!=db,env in (prod,b),!legacy,version",
        WEB,
        True,
        "app=web,env in (b,prod),!legacy,tier!=db,version",
    ),
    ("  app = web ,  tier   notin(db)  ", WEB, True, "app=web,tier notin (db)"),
    ("example.com/team=core", {"example.com/team": "core"}, True, "example.com/team=core"),
    ("app=in", {"app": "in"}, True, "app=in"),
    ("", WEB, True, ""),
    ("", {}, True, ""),
    ("app!=db,app=web", WEB, True, "app=web,app!=db"),
]


@pytest.mark.parametrize(
    ("text", "labels", "expected", "canonical"),
    STRING_CASES,
    ids=[case[0] or "<empty>" for case in STRING_CASES],
)
def test_string_form_parse_match_print(
    text: str, labels: dict[str, str], expected: bool, canonical: str
) -> None:
    selector = Selector.parse(text)
    assert selector.matches(labels) is expected
    assert selector.to_string() == canonical
    # The canonical form parses back to the same selector: equal and equally hashed.
    again = Selector.parse(canonical)
    assert again == selector
    assert hash(again) == hash(selector)


JSON_CASES = [
    ("match-labels", {"matchLabels": {"app": "web"}}, WEB, True, "app=web"),
    ("match-labels-miss", {"matchLabels": {"app": "web", "tier": "db"}}, WEB, False, "app=web,tier=db"),
    (
        "in",
        {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "qa"]}]},
        WEB,
        True,
        "env in (prod,qa)",
    ),
    (
        "notin",
        {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]},
        WEB,
        False,
        "env notin (prod)",
    ),
    ("exists", {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, WEB, True, "tier"),
    (
        "does-not-exist",
        {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist", "values": []}]},
        WEB,
        False,
        "!tier",
    ),
    (
        "both-parts",
        {
            "matchLabels": {"tier": "frontend"},
            "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}],
        },
        WEB,
        True,
        "app in (web),tier=frontend",
    ),
    ("empty-object-selects-everything", {}, {}, True, ""),
    ("empty-parts-select-everything", {"matchLabels": {}, "matchExpressions": []}, WEB, True, ""),
    ("null-parts-select-everything", {"matchLabels": None, "matchExpressions": None}, WEB, True, ""),
]


@pytest.mark.parametrize(
    ("raw", "labels", "expected", "canonical"), [c[1:] for c in JSON_CASES], ids=[c[0] for c in JSON_CASES]
)
def test_json_form(raw: dict[str, object], labels: dict[str, str], expected: bool, canonical: str) -> None:
    selector = Selector.from_label_selector(raw)
    assert selector.matches(labels) is expected
    assert selector.to_string() == canonical
    assert not selector.is_nothing()


def test_nil_selector_selects_nothing_and_empty_selects_everything() -> None:
    nothing = Selector.from_label_selector(None)
    assert nothing == Selector.nothing()
    assert nothing.is_nothing()
    assert not nothing.is_everything()
    assert not nothing.matches({})
    assert not nothing.matches(WEB)
    everything = Selector.from_label_selector({})
    assert everything == Selector.everything() == Selector.parse("")
    assert everything.is_everything()
    assert everything.matches({})
    assert everything.matches(WEB)
    assert nothing != everything
    assert len({nothing, everything, Selector.parse("app=web"), Selector.parse("app==web")}) == 3


def test_json_and_string_forms_agree() -> None:
    from_json = Selector.from_label_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "env", "operator": "NotIn", "values": ["qa", "dev", "qa"]},
                {"key": "legacy", "operator": "DoesNotExist"},
            ],
        }
    )
    from_string = Selector.parse("!legacy, env notin (dev,qa), app=web")
    built = Selector.of(
        [
            Requirement.of("legacy", Operator.DOES_NOT_EXIST),
            Requirement.of("env", Operator.NOT_IN, ["qa", "dev"]),
            Requirement.of("app", Operator.EQUALS, ["web"]),
        ]
    )
    assert from_json == from_string == built
    assert from_json.to_string() == "app=web,env notin (dev,qa),!legacy"
    assert Selector.from_match_labels({"tier": "db", "app": "web"}).to_string() == "app=web,tier=db"


STRING_ERRORS = [
    ("bad-key-chars", "app$=web", "invalid label key 'app$'"),
    ("key-too-long", "a" * 64 + "=x", "no more than 63 characters"),
    ("bad-prefix", "Example.com/app=x", "prefix part must be a lowercase RFC 1123 subdomain"),
    ("two-slashes", "a/b/c=x", "at most one '/'"),
    ("empty-name", "example.com/=x", "name part must be non-empty"),
    ("bad-value", "app=-web", "invalid label value '-web'"),
    ("value-too-long", "app=" + "v" * 64, "invalid label value"),
    ("in-without-values-paren", "env in prod", "expected '('"),
    ("unclosed-set", "env in (a,b", "found end of string"),
    ("two-values-without-comma", "env in (a b)", "expected ',' or ')'"),
    ("dangling-comma", "app=web,", "found end of string, expected a label key"),
    ("leading-comma", ",app=web", "expected a label key"),
    ("unknown-operator-word", "env within (a)", "expected one of '=', '==', '!=', 'in', 'notin'"),
    ("not-followed-by-operator", "!app=web", "expected ',' or end of string"),
    ("gt-not-integer", "version>abc", "must be an integer"),
    ("double-bang", "!!app", "expected a label key"),
    ("keyword-as-key", "in=x", "expected a label key"),
]


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in STRING_ERRORS], ids=[c[0] for c in STRING_ERRORS]
)
def test_string_form_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        Selector.parse(text)
    assert message in str(caught.value)


JSON_ERRORS = [
    (
        "unknown-operator",
        {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
        "matchExpressions[0].operator: 'Gt' is not a valid label selector operator",
    ),
    (
        "in-without-values",
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
        "matchExpressions[0]: key 'a': for 'in', 'notin' operators, values set can't be empty",
    ),
    (
        "notin-values-missing",
        {"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
        "values set can't be empty",
    ),
    (
        "exists-with-values",
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        "values set must be empty for exists and does not exist",
    ),
    ("bad-match-label-value", {"matchLabels": {"app": "we b"}}, "invalid label value 'we b'"),
    ("non-string-match-label", {"matchLabels": {"app": 3}}, "matchLabels['app'] must be a string, got int"),
    (
        "bad-expression-key",
        {"matchExpressions": [{"key": "a b", "operator": "Exists"}]},
        "matchExpressions[0]: invalid label key 'a b'",
    ),
    (
        "missing-key",
        {"matchExpressions": [{"operator": "Exists"}]},
        "matchExpressions[0].key must be a string, got NoneType",
    ),
    ("expressions-not-list", {"matchExpressions": {"key": "a"}}, "matchExpressions must be a list"),
    ("labels-not-object", {"matchLabels": ["a"]}, "matchLabels must be an object"),
    (
        "value-not-string",
        {"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]},
        "matchExpressions[0].values[0] must be a string",
    ),
]


@pytest.mark.parametrize(("raw", "message"), [c[1:] for c in JSON_ERRORS], ids=[c[0] for c in JSON_ERRORS])
def test_json_form_errors(raw: dict[str, object], message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        Selector.from_label_selector(raw)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("app", True),
        ("app.kubernetes.io/name", True),
        ("a" * 63, True),
        ("k8s.io/" + "a" * 63, True),
        ("a" * 254 + "/x", False),
        ("-app", False),
        ("app_", False),
        ("a_b.c-d", True),
        ("", False),
    ],
    ids=[
        "plain",
        "prefixed",
        "63-chars",
        "prefixed-63",
        "prefix-too-long",
        "leading-dash",
        "trailing-underscore",
        "inner-punctuation",
        "empty",
    ],
)
def test_label_key_rules(key: str, ok: bool) -> None:
    if ok:
        assert Requirement.of(key, Operator.EXISTS).key == key
    else:
        with pytest.raises(SelectorError):
            Requirement.of(key, Operator.EXISTS)


_names = st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?", fullmatch=True).filter(
    lambda s: s not in ("in", "notin")
)
_keys = st.one_of(
    _names, st.builds(lambda p, n: f"{p}.io/{n}", st.from_regex(r"[a-z]{1,8}", fullmatch=True), _names)
)
_requirements = st.one_of(
    st.builds(lambda k, v: Requirement.of(k, Operator.EQUALS, [v]), _keys, _names),
    st.builds(lambda k, v: Requirement.of(k, Operator.NOT_EQUALS, [v]), _keys, _names),
    st.builds(
        lambda k, vs: Requirement.of(k, Operator.IN, vs), _keys, st.lists(_names, min_size=1, max_size=4)
    ),
    st.builds(
        lambda k, vs: Requirement.of(k, Operator.NOT_IN, vs), _keys, st.lists(_names, min_size=1, max_size=4)
    ),
    st.builds(lambda k: Requirement.of(k, Operator.EXISTS), _keys),
    st.builds(lambda k: Requirement.of(k, Operator.DOES_NOT_EXIST), _keys),
    st.builds(lambda k, n: Requirement.of(k, Operator.GREATER_THAN, [str(n)]), _keys, st.integers(-99, 99)),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_requirements, max_size=6), st.dictionaries(_keys, _names, max_size=6))
def test_string_form_round_trips_and_agrees_on_matching(
    requirements: list[Requirement], labels: dict[str, str]
) -> None:
    selector = Selector.of(requirements)
    parsed = Selector.parse(selector.to_string())
    assert parsed == selector
    assert parsed.matches(labels) == all(r.matches(labels) for r in requirements)


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("app=web", (("app", "web"),)),
        ("app in (a,b),tier=db", (("app", "a"), ("app", "b"))),  # the first pinning one, by key
        ("app!=web,tier=db", (("tier", "db"),)),
        ("app notin (a),track", None),
        ("", None),
    ],
    ids=["equals", "in-first", "skips-not-equals", "no-pinning-requirement", "everything"],
)
def test_index_terms_are_pairs_every_match_holds(
    text: str, terms: tuple[tuple[str, str], ...] | None
) -> None:
    assert Selector.parse(text).index_terms() == terms


def test_nothing_has_no_index_terms() -> None:
    assert Selector.nothing().index_terms() == ()
