"""How much memory one session may use, and what a data set with its chains needs.

The server's limit is the library's (:func:`lpviz.budget.memory_limit`:
``LPVIZ_MEMORY_LIMIT``, default 60% of the machine) shared by the sessions
expected at once (``LPVIZ_APP_SESSIONS``, default 4; ``python -m lpviz.dashboard.serve
--sessions``). A session asks before it allocates anything that scales with
the data (:func:`check_session`), so a request too large for the server gets
a message naming the size that fits while the other sessions go on.

What a session holds per cell of a D x V data set: the counts as loaded, the
truth, the release and the noise's working copies (int64 each), the true
rates of a simulation (float64), and per chain the model's and the method's
own state (:meth:`Model.state_bytes`, :meth:`Method.state_bytes`), the
chain's copy of the counts, the posterior's running sum of the rates and the
snapshots on their way to the views (float64 each).
"""

SESSIONS_ENV = "LPVIZ_APP_SESSIONS"
DEFAULT_SESSIONS = 4
DATA_ARRAYS = 6  # counts, truth, release, noise working copies (2), true rates: 8 bytes a cell each
CHAIN_ARRAYS = 5  # counts copy, running sum of the rates, snapshots in flight (3): 8 bytes a cell each


def expected_sessions():
    from lpviz._env import env_count

    return env_count(SESSIONS_ENV, DEFAULT_SESSIONS)


def session_limit():
    """Bytes one session may use: the server's memory limit over the sessions expected at once."""
    from lpviz.budget import memory_limit

    return memory_limit() // expected_sessions()


def session_bytes(shape, model_name, n_components, method_names, run=None):
    """Bytes a session needs for a data set of ``shape`` and one chain per method of ``method_names``;
    with ``run = (n_iter, burn_in, thin)``, also each chain's posterior at the end of that run
    (:func:`lpviz.engine.posterior_bytes`: its saved samples and traces)."""
    from lpviz import methods, models
    from lpviz.budget import dense_bytes
    from lpviz.engine import posterior_bytes
    from lpviz.models import matrix_shape

    cells = dense_bytes(shape, "int64") // 8
    model = models.create(model_name, n_components)
    total = DATA_ARRAYS * 8 * cells
    for name in method_names:
        # methods see the cells as a matrix (rows x the other modes flattened)
        method_bytes = methods.get(name)().state_bytes(matrix_shape(shape), model)
        total += model.state_bytes(shape) + method_bytes + CHAIN_ARRAYS * 8 * cells
        if run is not None:
            total += posterior_bytes(model, shape, *run)
    return total


def largest_square(limit, model_name, n_components, method_names, further=()):
    """The largest ``n`` such that an ``n x n`` data set (``n x n x further``: a tensor with those
    further modes) and its chains fit ``limit`` bytes."""
    from lpviz.budget import largest_square_that_fits

    low, high = 0, largest_square_that_fits(8 * DATA_ARRAYS, limit) + 1  # the data alone bound it
    further = tuple(further)
    while high - low > 1:  # session_bytes grows with n: bisect
        middle = (low + high) // 2
        if session_bytes((middle, middle, *further), model_name, n_components, method_names) <= limit:
            low = middle
        else:
            high = middle
    return low


def check_session(shape, what, model_name, n_components, method_names, fix="", run=None):
    """Raise :class:`lpviz.budget.MemoryBudgetError` if the data set and its chains do not fit
    this session's share of the server; the message says the largest square that does. With
    ``run = (n_iter, burn_in, thin)`` the chains' posteriors at the end of that run count too,
    and a run whose saved samples are what does not fit is told the thinning that would."""
    from lpviz.budget import check_memory, format_bytes, memory_limit

    limit = session_limit()
    need = session_bytes(shape, model_name, n_components, method_names, run)
    if need <= limit:
        return
    without_run = session_bytes(shape, model_name, n_components, method_names)
    if run is not None and without_run <= limit:  # the data and chains fit: the saved samples do not
        from lpviz import models
        from lpviz.engine import check_posterior_memory

        room = (limit - without_run) // max(1, len(method_names))
        check_posterior_memory(models.create(model_name, n_components), shape, *run, limit=room)
    side = largest_square(limit, model_name, n_components, method_names, further=tuple(shape[2:]))
    chains = f"{len(method_names)} chain{'s' if len(method_names) != 1 else ''}"
    check_memory(
        need,
        f"{what} with {chains}",
        limit=limit,
        fix=f"Each session may use {format_bytes(limit)} (the server's {format_bytes(memory_limit())} "
        f"shared by {expected_sessions()} sessions); the largest square that fits is about "
        f"{' x '.join([f'{side:,}', f'{side:,}', *(f'{n:,}' for n in shape[2:])])}. {fix}".strip(),
    )


# The central fit (lpviz.central.PrivateLDA on the true counts): its float64 copy of the counts
# (CSR: at most a value and an index per cell) and the fitted rates scored block by block (one
# cell each), plus per topic and word lambda, exp(E log beta), the statistic and its noise, the
# word-scaled weights and the topics (6), and per document and topic gamma and theta (2).
CENTRAL_CELL_BYTES = 3 * 8
CENTRAL_TOPIC_WORD_ARRAYS = 6
CENTRAL_DOC_TOPIC_ARRAYS = 2


def central_bytes(shape, n_components):
    """Bytes a central fit of ``n_components`` topics on ``shape`` true counts needs beside the session."""
    from lpviz.budget import dense_bytes

    cells = dense_bytes(shape, "int64") // 8
    n_docs, n_words = shape
    return (
        CENTRAL_CELL_BYTES * cells
        + 8 * CENTRAL_TOPIC_WORD_ARRAYS * n_components * n_words
        + 8 * CENTRAL_DOC_TOPIC_ARRAYS * n_docs * n_components
    )


def check_central(shape, what, model_name, n_components, method_names):
    """Raise :class:`lpviz.budget.MemoryBudgetError` if a central fit beside the session's data and
    chains (``method_names``) does not fit this session's share of the server."""
    from lpviz.budget import check_memory, format_bytes

    limit = session_limit()
    need = session_bytes(shape, model_name, n_components, method_names) + central_bytes(shape, n_components)
    check_memory(
        need,
        f"a central fit of {what} beside {len(method_names)} chains",
        limit=limit,
        fix=f"Each session may use {format_bytes(limit)}: choose fewer documents or words, or fewer components.",
    )
