"""svg.esc / svg.attr escape exactly as xml.sax.saxutils' escape / quoteattr (which svg.py no
longer imports: it costs ~7 MiB at ``import lazyarray``)."""
from xml.sax.saxutils import escape, quoteattr

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lazyarray.graph import svg

AWKWARD = ["", "plain", "a < b", "a > b & c", "&amp;", 'say "hi"', "it's", "both ' and \"",
           "tab\tnew\nline\rret", "\"'<>&\n\r\t", "unicode é ∑ 🙂", 3, 2.5, None]


@pytest.mark.parametrize("s", AWKWARD)
def test_matches_saxutils_on_awkward_values(s):
    assert svg.esc(s) == escape(str(s))
    assert svg.attr(s) == quoteattr(str(s))


@given(st.text(alphabet=st.sampled_from("ab&<>\"'\n\r\t é;#"), max_size=30) | st.text(max_size=30))
def test_matches_saxutils(s):
    assert svg.esc(s) == escape(s)
    assert svg.attr(s) == quoteattr(s)
