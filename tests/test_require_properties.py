"""Property-based tests of version ordering and of the evaluator's invariants."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpuconf.compat.require import Gpu, HostFacts, Op, compare_version, evaluate
from gpuconf.compat.versions import parse_cuda, parse_driver

component = st.integers(min_value=0, max_value=10**6)
parts = st.lists(component, min_size=1, max_size=5)


def text(ps: list[int], zeros: list[int] | None = None) -> str:
    zeros = zeros or [0] * len(ps)
    return ".".join("0" * z + str(p) for p, z in zip(ps, zeros, strict=False))


def key(ps: list[int]) -> tuple[int, ...]:
    out = list(ps)
    while out and out[-1] == 0:
        out.pop()
    return tuple(out)


@given(parts, parts)
def test_version_comparison_is_numeric_with_zero_extension(a, b):
    ka, kb = key(a), key(b)
    ta, tb = text(a), text(b)
    assert compare_version(ta, Op.EQUAL, tb) is (ka == kb)
    assert compare_version(ta, Op.NOT_EQUAL, tb) is (ka != kb)
    assert compare_version(ta, Op.LESS, tb) is (ka < kb)
    assert compare_version(ta, Op.LESS_EQUAL, tb) is (ka <= kb)
    assert compare_version(ta, Op.GREATER, tb) is (ka > kb)
    assert compare_version(ta, Op.GREATER_EQUAL, tb) is (ka >= kb)


@given(parts, parts)
def test_exactly_one_of_less_equal_greater_holds(a, b):
    ta, tb = text(a), text(b)
    answers = [compare_version(ta, op, tb) for op in (Op.LESS, Op.EQUAL, Op.GREATER)]
    assert answers.count(True) == 1
    assert compare_version(ta, Op.LESS, tb) is compare_version(tb, Op.GREATER, ta)


@given(parts, st.lists(st.integers(0, 3), min_size=5, max_size=5))
def test_leading_zeros_do_not_matter(a, zeros):
    assert compare_version(text(a, zeros[: len(a)]), Op.EQUAL, text(a)) is True


@given(st.lists(component, min_size=2, max_size=4), st.lists(component, min_size=2, max_size=4))
def test_driver_version_order_agrees_with_the_evaluator(a, b):
    da, db = parse_driver(text(a)), parse_driver(text(b))
    assert (da < db) is compare_version(text(a), Op.LESS, text(b))
    assert (da == db) is compare_version(text(a), Op.EQUAL, text(b))


@given(st.integers(1, 99), st.integers(0, 9))
def test_cuda_integer_round_trips(major, minor):
    v = parse_cuda(f"{major}.{minor}")
    assert parse_cuda(v.as_int()) == v


# --- evaluator invariants ---------------------------------------------------------------

names = st.sampled_from(["cuda", "driver", "arch"])
ops = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])
versions = parts.map(text)
brands = st.sampled_from(["tesla", "nvidia", "geforce", "nvidiartx", "quadro", "unknown"])
facts = st.builds(
    HostFacts,
    cuda=st.sampled_from(["11.4", "12.2", "12.8", "13.0"]),
    driver=st.sampled_from(["535.104.05", "570.133.20", "580.65.06"]),
    gpus=st.just((Gpu("9.0", "Nvidia"),)),
)
factor = st.one_of(
    st.tuples(names, ops, versions).map("".join),
    st.tuples(st.just("brand"), st.sampled_from(["=", "!="]), brands).map("".join),
)
term = st.lists(factor, min_size=1, max_size=3).map(",".join)


def ok(req: str, f: HostFacts) -> bool:
    result = evaluate(req, f, f.gpus[0])
    assert result != "invalid expression"
    return result is None


@given(term, term, facts)
def test_space_is_or_and_comma_is_and(a, b, f):
    assert ok(f"{a} {b}", f) is (ok(a, f) or ok(b, f))
    assert ok(f"{a},{b}", f) is (ok(a, f) and ok(b, f))


@given(st.lists(term, min_size=1, max_size=4), facts)
def test_message_names_the_first_token(terms, f):
    req = " ".join(terms)
    result = evaluate(req, f, f.gpus[0])
    if result is not None:
        first = terms[0]
        suffix = ", please update" if first.startswith("cuda>=") else ""
        assert result.startswith(f"unsatisfied condition: {first}{suffix}")
        assert result.count("please update") == (1 if suffix else 0)


@given(term, st.text(min_size=1, max_size=12).filter(lambda s: " " not in s and "\0" not in s), facts)
def test_text_after_a_satisfied_term_is_never_parsed(a, garbage, f):
    if ok(a, f):
        assert evaluate(f"{a} {garbage}", f, f.gpus[0]) is None


@given(term, facts)
def test_names_and_brands_ignore_ascii_case(a, f):
    assert ok(a.upper(), f) is ok(a, f)


@given(st.tuples(st.sampled_from(["arch", "brand"]), ops, versions).map("".join), facts)
def test_device_facts_hold_when_no_gpu_is_visible(req, f):
    assert evaluate(req, HostFacts(cuda=f.cuda, driver=f.driver, gpus=()), None) is None
