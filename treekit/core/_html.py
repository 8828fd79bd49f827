"""HTML for notebooks: the style every treekit view shares (inline, light and dark themes),
the two-sided rows of diffs and mismatch errors (:func:`pair`), and :class:`HtmlText`, a
``str`` that a notebook shows as HTML (``summary`` and ``format_tree`` return one)."""

from __future__ import annotations

import html

__all__ = ["CSS", "HtmlText", "fragment", "pair"]

CSS = """
.tk-view{--fg:#1f2328;--bg:#fff;--dim:#656d76;--line:#d0d7de;--key:#0550ae;--bad:#cf222e;--spec:#8250df;
font:12px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:var(--fg);background:var(--bg);
padding:6px 8px;border:1px solid var(--line);border-radius:6px;overflow-x:auto}
@media (prefers-color-scheme:dark){.tk-view{--fg:#e6edf3;--bg:#0d1117;--dim:#8d96a0;--line:#30363d;
--key:#79c0ff;--bad:#ff7b72;--spec:#d2a8ff}}
[data-jp-theme-light=false] .tk-view,.vscode-dark .tk-view,.tk-view.tk-dark{--fg:#e6edf3;--bg:#0d1117;
--dim:#8d96a0;--line:#30363d;--key:#79c0ff;--bad:#ff7b72;--spec:#d2a8ff}
.tk-view details{margin-left:1.2em}.tk-view>details{margin-left:0}
.tk-view summary{cursor:pointer;white-space:nowrap}.tk-view .tk-leaf{margin-left:2.4em;white-space:nowrap}
.tk-view .tk-key{color:var(--key)}.tk-view .tk-kind{font-weight:600}.tk-view .tk-dim{color:var(--dim)}
.tk-view .tk-spec{color:var(--spec)}.tk-view .tk-bad{color:var(--bad);font-weight:600}
.tk-view .tk-path{color:var(--dim);user-select:all;margin-left:1em}.tk-view .tk-total{font-weight:600;margin-bottom:4px}
.tk-view .tk-values{color:var(--dim)}
.tk-view table{border-collapse:collapse}.tk-view th,.tk-view td{padding:1px 8px;text-align:left;white-space:nowrap}
.tk-view th{border-bottom:1px solid var(--line)}.tk-view td.tk-num,.tk-view th.tk-num{text-align:right}
.tk-view tr.tk-sum td{border-top:1px solid var(--line);font-weight:600}.tk-view pre{margin:0;font:inherit}
.tk-view .tk-pairs details{margin-left:0}.tk-view .tk-pair{display:flex;list-style:none}
.tk-view .tk-pair::-webkit-details-marker{display:none}.tk-view .tk-half{flex:0 0 50%;box-sizing:border-box;
padding-right:1em;white-space:normal;overflow-wrap:anywhere}.tk-view .tk-half::before{content:"\\2003"}
.tk-view summary.tk-pair>.tk-half:first-child::before{content:"\\25B8\\2002"}
.tk-view details[open]>summary.tk-pair>.tk-half:first-child::before{content:"\\25BE\\2002"}
.tk-view .tk-heads{font-weight:600;border-bottom:1px solid var(--line)}
.tk-view .tk-changed{background:rgba(212,167,44,.25)}.tk-view .tk-gone{background:rgba(207,34,46,.18)}
.tk-view .tk-new{background:rgba(26,127,55,.18)}.tk-view .tk-why{color:var(--bad)}
"""


def fragment(body: str) -> str:
    """``body`` inside the shared frame and style: one self-contained HTML fragment."""
    return f'<div class="tk-view"><style>{CSS}</style>{body}</div>'


def pair(level: int, left: str, right: str, css: tuple[str, str] = ("", ""), tag: str = "div") -> str:
    """One row of a two-sided view (``a`` | ``b``): the two HTML halves, each indented
    ``level`` steps and given its class from ``css``; ``tag='summary'`` makes the row the
    heading of a ``<details>`` (its marker drawn by the style).

    >>> print(pair(1, 'x', 'y', ('', 'tk-new')).replace('><', '>\\n<'))
    <div class="tk-pair">
    <span class="tk-half" style="padding-left:1.2em">x</span>
    <span class="tk-half tk-new" style="padding-left:1.2em">y</span>
    </div>
    """
    pad = f' style="padding-left:{level * 1.2:.1f}em"' if level else ""
    halves = "".join(
        f'<span class="tk-half{" " + c if c else ""}"{pad}>{half}</span>' for half, c in zip((left, right), css)
    )
    return f'<{tag} class="tk-pair">{halves}</{tag}>'


class HtmlText(str):
    """A ``str`` (equal to its text) that notebooks show as HTML: its ``_repr_html_``.

    >>> t = HtmlText('a < b', '<pre>a &lt; b</pre>')
    >>> t == 'a < b', t._repr_html_()[-25:]
    (True, '<pre>a &lt; b</pre></div>')
    """

    def __new__(cls, text: str, body: str | None = None) -> HtmlText:
        made = super().__new__(cls, text)
        made._body = f"<pre>{html.escape(text)}</pre>" if body is None else body
        return made

    _body: str

    def _repr_html_(self) -> str:
        return fragment(self._body)
