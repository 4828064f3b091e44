"""The words the chapters use for the protocol's settings: one phrase per engine, per protocol.

A chapter glues these phrases rather than typing "MAP engine" into its prose, so a rerun with
another engine or protocol (a chapter's ``ENGINE`` or ``PROTOCOL`` parameter) says what it ran.
"""

from __future__ import annotations

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["ENGINE_WORDS", "ENGINE_SHORT", "PROTOCOL_WORDS", "NAN_WORDS", "engine_words", "engine_short",
           "nan_rule_words", "ENGINE_ROLE", "engine_caption", "ENGINE_NOUN", "engine_noun", "BAND_WORDS",
           "AGREEMENT_BAND", "band_caption", "names_phrase", "number_word"]

#: A calibration engine, in a clause that says what it fits and how (paper, Section 3 and appendix B).
ENGINE_WORDS = {
    "pyirt-authors": "the authors' calibration: py-irt with its hierarchical priors, the learning rate decayed by "
                     "0.9999 per epoch and the parameters of the epoch with the lowest loss (irtlib's batched "
                     "implementation, the same parameters as py-irt's)",
    "pyirt": "py-irt with the text's fixed priors (θ ~ N(0, 1), b ~ N(0, 1), a ~ LogNormal(0, 1)) at a constant "
             "learning rate",
    "map": "irtlib's fast MAP engine: the posterior mode of the text's model and priors",
}

#: The same, in two or three words for captions and table headers.
ENGINE_SHORT = {"pyirt-authors": "authors' calibration", "pyirt": "py-irt, text's priors", "map": "MAP engine"}

#: The same as a noun phrase inside a sentence ("..., as with the MAP engine").
ENGINE_NOUN = {"pyirt-authors": "the authors' calibration", "pyirt": "py-irt with the text's priors",
               "map": "the MAP engine"}

#: Why a chapter's main fit is this engine, as a clause ("..., the calibration the authors' numbers come from").
ENGINE_ROLE = {"pyirt-authors": "the calibration the authors' released code runs, so the one their reported numbers "
                                "come from",
               "pyirt": "the calibration the paper's text describes",
               "map": "irtlib's fast stand-in for the text's model"}

#: A protocol by name.
PROTOCOL_WORDS = {"authors": "the protocol as the authors' released code runs it",
                  "paper": "the protocol as the paper's text describes it"}

#: What a protocol does with an undefined Spearman rho (a test set whose scores all tie), by ``Protocol.nan_policy``.
NAN_WORDS = {"zero": "counts as 0 in the mean over splits",
             "omit": "is dropped from the mean over splits (nanmean), not counted as 0"}


#: What the shading around an agreement curve is, by band rule (:func:`irtlib.agreement_curves`'s ``band``).
BAND_WORDS = {"sd": "one standard deviation of single splits around the mean (the paper's text)",
              "se": "one standard error of the mean over the splits with a defined ρ (the authors' code)",
              "none": "none"}

#: The band every agreement-curve figure of the book shades, unless a chapter's protocol says otherwise
#: (chapters 5 and 6 shade their protocol's own rule): the authors' code's, so the same kind of figure
#: means the same thing on every page.
AGREEMENT_BAND = "se"


def band_caption(band: str = AGREEMENT_BAND) -> str:
    """A caption's clause for the shading: "shading: one standard error of the mean over ..."."""
    return f"shading: {BAND_WORDS[band]}"


def _epochs_of(engine: str) -> tuple[str, int | None]:
    """``(engine, epochs)`` of an engine run at other epochs (``"pyirt-authors@300"``, a QUICK build's); else None."""
    from .authors_engine import parse_engine

    return parse_engine(engine)


def engine_words(engine: str) -> str:
    """The clause for ``engine`` (a registered engine without words is named as itself).

    The authors' calibration at other epochs (:func:`irtbook.authors_engine.engine_name`, a QUICK
    build's) is the authors' clause with its epochs.
    """
    base, epochs = _epochs_of(engine)
    if epochs is not None:
        return f"{ENGINE_WORDS[base]}, run for {epochs:,} epochs"
    return ENGINE_WORDS.get(engine, f"the calibration engine {engine!r}")


def engine_short(engine: str) -> str:
    """The caption word for ``engine`` (with its epochs when run at other epochs, as :func:`engine_words`)."""
    base, epochs = _epochs_of(engine)
    if epochs is not None:
        return f"{ENGINE_SHORT[base]}, {epochs:,} epochs"
    return ENGINE_SHORT.get(engine, str(engine))


def nan_rule_words(protocol) -> str:
    """The undefined-rho rule of ``protocol`` (a :class:`irtlib.protocol.presets.Protocol`), naming the protocol.

    One rule per protocol, read from its ``nan_policy``: e.g. "counts as 0 in the mean over splits,
    the rule of the protocol as the paper's text describes it".
    """
    rule = NAN_WORDS.get(protocol.nan_policy, f"follows the rule {protocol.nan_policy!r}")
    return f"{rule}, the rule of {PROTOCOL_WORDS.get(protocol.name, f'the protocol {protocol.name!r}')}"


def engine_caption(engine: str, epochs: int | None = None) -> str:
    """A caption's words for a fit: the engine's short name and, for a py-irt run, its epochs.

    E.g. "authors' calibration, 1,000 epochs"; "MAP engine".
    """
    short = engine_short(engine)
    named = _epochs_of(engine)[1] is not None           # the name carries its epochs already
    return short if engine == "map" or epochs is None or named else f"{short}, {int(epochs):,} epochs"


def engine_noun(engine: str) -> str:
    """``engine`` as a noun phrase for a sentence ("the authors' calibration", "the MAP engine").

    With its epochs when run at other epochs, as :func:`engine_words`.
    """
    base, epochs = _epochs_of(engine)
    if epochs is not None:
        return f"{ENGINE_NOUN[base]} at {epochs:,} epochs"
    return ENGINE_NOUN.get(engine, f"the engine {engine!r}")


def names_phrase(names, *, empty: str = "none") -> str:
    """``"A"``, ``"A and B"``, ``"A, B and C"``; ``empty`` for no names.

    >>> names_phrase(["A", "B", "C"]), names_phrase(["A"]), names_phrase([])
    ('A, B and C', 'A', 'none')
    """
    names = [str(n) for n in names]
    return empty if not names else names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


_SMALL_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def number_word(n: int) -> str:
    """A whole number in words below ten, in digits from ten on (``number_word(5) == "five"``)."""
    return _SMALL_NUMBERS[n] if 0 <= n < len(_SMALL_NUMBERS) else f"{n:,}"


def counted(n: int, noun: str, *, plural: str | None = None) -> str:
    """``n`` with its noun in the number it takes: ``"1 split"``, ``"2 splits"``, ``"1,000 splits"``.

    >>> counted(1, "split"), counted(2, "split"), counted(0, "model"), counted(3, "study", plural="studies")
    ('1 split', '2 splits', '0 models', '3 studies')
    """
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
