"""Heat map of attention weights saved by `attnbench attend ... --weights W.npy`:
row i is query token i, and its colours show which key tokens it attends to
(each row sums to 1). The file is float32, shaped [seq_q, seq_kv],
[heads, seq_q, seq_kv] or [batch, heads, seq_q, seq_kv].

    attnbench-heatmap W.npy [--batch B] [--head H]
        [--tokens "The cat sat on the mat" | --tokens-file FILE] [--out DIR]

Tokens label the keys; with seq_q < seq_kv the queries are the last seq_q tokens
(the causal mask aligns to the end). Default output folder: the .npy's folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from .. import cli, plotting as ap, results as ar

# Past this many tokens a label per row would overlap; label every k-th instead.
MAX_LABELLED_TOKENS = 64


def require_regular_file(path, what: str) -> None:
    """Refuses anything but a regular file, before it is opened: a FIFO would block the read until
    something wrote to it (a --tokens-file FIFO hung until killed)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ar.ResultsError(f"{path}: no such file") from None
    except OSError as error:
        raise ar.ResultsError(f"{path}: cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(mode):
        raise ar.ResultsError(f"{path}: is {ar.file_kind(mode)}, not a regular file, so not read "
                              f"as {what}")


def load_weights(path: Path) -> tuple[np.ndarray, tuple[int, ...]]:
    """The file as a 4-d [batch, heads, seq_q, seq_kv] array, and its shape as stored."""
    require_regular_file(path, "a .npy file")
    try:
        with open(path, "rb") as handle:
            header = handle.read(6)
    except OSError as error:
        raise ar.ResultsError(f"{path}: cannot be read ({error.strerror})") from None
    if header != b"\x93NUMPY":
        raise ar.ResultsError(f"{path}: not a .npy file (no NumPy header)")
    try:
        weights = np.load(path, allow_pickle=False)
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as error:  # noqa: BLE001
        # NumPy reads the header with ast.literal_eval: a damaged one raises whatever the parser
        # does (SyntaxError, tokenize's TokenError, OverflowError for a huge dimension), several
        # lines long; each is a file that is not a readable .npy, said in one line.
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ar.ResultsError(f"{path}: not a readable .npy file ({reason})") from None
    if not isinstance(weights, np.ndarray) or weights.dtype.kind != "f":
        raise ar.ResultsError(f"{path}: expected floating-point weights, got dtype {weights.dtype}")
    if weights.ndim not in (2, 3, 4) or 0 in weights.shape:
        raise ar.ResultsError(f"{path}: expected shape [seq_q, seq_kv], [heads, seq_q, seq_kv] or "
                              f"[batch, heads, seq_q, seq_kv], got {list(weights.shape)}")
    return weights.reshape((1,) * (4 - weights.ndim) + weights.shape), weights.shape


def read_tokens(text: str | None, file: str | None) -> list[str] | None:
    if file is not None:
        require_regular_file(file, "tokens")
        try:
            content = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ar.ResultsError(f"{file}: cannot read tokens ({error})") from None
        lines = [line for line in content.splitlines() if line.strip()]
        # One token per line lets tokens hold spaces; a single line is split on whitespace.
        return lines if len(lines) > 1 else content.split()
    return text.split() if text is not None else None


def axis_labels(tokens: list[str] | None, seq_q: int, seq_kv: int) -> tuple[list[str], list[str]] | None:
    if tokens is None:
        return None
    if len(tokens) != seq_kv:
        raise ar.ResultsError(f"{len(tokens)} tokens given but the weights have seq_kv = {seq_kv} "
                              f"(shape {seq_q}x{seq_kv}); give one token per key")
    return tokens[seq_kv - seq_q:], tokens


def set_token_ticks(axis, labels: list[str], rotation: float) -> None:
    step = max(1, -(-len(labels) // MAX_LABELLED_TOKENS))
    positions = list(range(0, len(labels), step))
    axis.set_ticks(positions, [labels[i] for i in positions], rotation=rotation)


def colour_max(matrix: np.ndarray) -> float:
    """The top of the colour scale: the largest finite weight (one inf had made the scale
    -0.1..0.1, every finite weight drawn saturated; the caption counts the non-finite ones)."""
    finite = matrix[np.isfinite(matrix)]
    return max(float(finite.max()), 1e-12) if finite.size else 1.0


def plot(weights_path: Path, out_dir: Path, batch: int = 0, head: int = 0,
         tokens: list[str] | None = None) -> list[Path]:
    weights, stored_shape = load_weights(weights_path)
    batches, heads, seq_q, seq_kv = weights.shape
    if not 0 <= batch < batches:
        raise ar.ResultsError(f"--batch {batch} out of range: the file has {batches} batch(es)")
    if not 0 <= head < heads:
        raise ar.ResultsError(f"--head {head} out of range: the file has {heads} head(s)")
    matrix = weights[batch, head].astype(np.float64)
    labels = axis_labels(tokens, seq_q, seq_kv)

    side = min(14.0, max(5.0, 0.3 * max(seq_q, seq_kv)))
    fig, ax = ap.plt.subplots(figsize=(side + 1.5, side), layout="constrained")
    image = ax.imshow(matrix, cmap="viridis", vmin=0.0, vmax=colour_max(matrix),
                      interpolation="nearest", aspect="auto")
    fig.colorbar(image, ax=ax, label="attention weight")
    ax.set_xlabel("key token (attended to)")
    ax.set_ylabel("query token (attending)")
    if labels:
        set_token_ticks(ax.yaxis, labels[0], rotation=0)
        set_token_ticks(ax.xaxis, labels[1], rotation=90)
        ax.xaxis.tick_top()
        ax.xaxis.set_label_position("top")

    # A weights file that is not row-stochastic is a bug upstream; say so on the figure.
    row_errors = np.abs(matrix.sum(axis=1) - 1.0)
    row_errors = row_errors[np.isfinite(row_errors)]  # (an all-NaN nanmax warned on stderr)
    row_sum_error = f"{float(row_errors.max()):.2g}" if row_errors.size else "not finite"
    caption = (f"{weights_path.name}: shape {list(stored_shape)}, "
               f"showing batch {batch}, head {head}; max |row sum - 1| = {row_sum_error}")
    if not np.isfinite(matrix).all():
        caption += f"; {int((~np.isfinite(matrix)).sum())} non-finite weights"
    title = f"Attention weights, batch {batch}, head {head}"
    return ap.save_figures({f"heatmap_{weights_path.stem}_b{batch}_h{head}":
                            ap.finish_figure(fig, title, [caption])}, out_dir)


def add_arguments(parser) -> None:
    parser.add_argument("weights", help="float32 .npy written by attnbench attend --weights")
    parser.add_argument("--batch", type=int, default=0, help="batch index (default 0)")
    parser.add_argument("--head", type=int, default=0, help="head index (default 0)")
    tokens = parser.add_mutually_exclusive_group()
    tokens.add_argument("--tokens", help='the tokens, space-separated: "The cat sat on the mat"')
    tokens.add_argument("--tokens-file",
                        help="file of tokens: one per line, or one whitespace-separated line")
    parser.add_argument("--out", help="output folder (default: the .npy's folder)")


def run(args) -> None:
    weights_path = Path(args.weights)
    out_dir = Path(args.out) if args.out else weights_path.parent
    tokens = read_tokens(args.tokens, args.tokens_file)
    cli.report_written(plot(weights_path, out_dir, args.batch, args.head, tokens))
