"""The bag of words every TF-IDF baseline reads, in one place: word 1-2 grams, sublinear tf
(1 + ln tf), smoothed idf, L2-normalised rows (scikit-learn's TfidfVectorizer); and whether
scikit-learn, an optional extra (`pip install 'bertkit[baseline]'`), is installed.

A module of its own so that a task module (seq2seq's retrieval predictor) and
bertkit.tasks.baseline (the classifiers' TF-IDF + linear model, which imports the task registry)
share these settings without an import circle.
"""

from __future__ import annotations

INSTALL = "pip install 'bertkit[baseline]'"


def not_tried(predictor: str) -> str:
    """A task baseline's "note" where one of its predictors needs scikit-learn and it is missing (seq2seq's
    retrieval, multiple choice's TF-IDF cosine): the row's "method" then names the predictor it chose
    without it, and this says what was left out and how to get it."""
    return f"{predictor}: not tried, scikit-learn is missing; {INSTALL} to see it"


def sklearn_available() -> bool:
    try:
        import sklearn  # noqa: F401  (an optional dependency: bertkit[baseline])
    except ImportError:
        return False
    return True


def tfidf_vectorizer():
    """A new, unfitted TfidfVectorizer with the baselines' settings (scikit-learn must be installed)."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # optional: bertkit[baseline]

    return TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
