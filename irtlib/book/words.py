"""The words the chapters use for the protocol's settings: one phrase per engine, per protocol.

A chapter glues these phrases rather than typing "MAP engine" into its prose, so a rerun with
another engine or protocol (a chapter's ``ENGINE`` or ``PROTOCOL`` parameter) says what it ran.
"""

from __future__ import annotations

#: Presentation only: a change here cannot change a computed number (irtlib.book.cache leaves it out).
__presentation__ = True
__all__ = ["ENGINE_WORDS", "ENGINE_SHORT", "PROTOCOL_WORDS", "engine_words", "engine_short"]

#: A calibration engine, in a clause that says what it fits and how (paper, Section 3 and appendix B).
ENGINE_WORDS = {
    "pyirt-authors": "the authors' calibration: py-irt with its hierarchical priors, the learning rate decayed by "
                     "0.9999 per epoch and the parameters of the epoch with the lowest loss (batched over splits, "
                     "the same parameters as separate py-irt fits)",
    "pyirt": "py-irt with the text's fixed priors (θ ~ N(0, 1), b ~ N(0, 1), a ~ LogNormal(0, 1)) at a constant "
             "learning rate",
    "map": "irtlib's fast MAP engine: the posterior mode of the text's model and priors",
}

#: The same, in two or three words for captions and table headers.
ENGINE_SHORT = {"pyirt-authors": "authors' calibration", "pyirt": "py-irt, text's priors", "map": "MAP engine"}

#: A protocol by name.
PROTOCOL_WORDS = {"authors": "the protocol as the authors' released code runs it",
                  "paper": "the protocol as the paper's text describes it"}


def engine_words(engine: str) -> str:
    """The clause for ``engine`` (a registered engine without words is named as itself)."""
    return ENGINE_WORDS.get(engine, f"the calibration engine {engine!r}")


def engine_short(engine: str) -> str:
    """The caption word for ``engine``."""
    return ENGINE_SHORT.get(engine, str(engine))
