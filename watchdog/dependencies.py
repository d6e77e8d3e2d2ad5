"""A batch's dependencies checked before it is enqueued: the first cycle they
would close, through the batch's own keys or through tasks enqueued before
(which the queue reads with the ``dependency_graph`` statement)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .models import NewTask

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def is_task_id(ref: str) -> bool:
    """Whether an ``after`` ref has a task id's shape (else it is a key)."""
    return _UUID.fullmatch(ref) is not None


def dependency_cycle(
    kept: Sequence[NewTask], rows: Sequence[Mapping[str, Any]]
) -> list[str] | None:
    """The first cycle the batch ``kept`` would close, as the keys (or
    titles, or ids) of its tasks from the first back to it; None when there
    is none. ``rows`` are the tasks enqueued before that the batch names
    (``id``, ``idem_key``, and ``deps``: their own refs and dep ids)."""
    batch = {t.key: i for i, t in enumerate(kept) if t.key is not None}
    by_id = {str(r["id"]): r for r in rows}
    by_key = {r["idem_key"]: r for r in rows if r["idem_key"] is not None}

    def node(ref: str) -> str | None:
        if ref in batch:
            return f"b{batch[ref]}"
        row = by_id.get(ref.lower()) if is_task_id(ref) else None
        row = row or by_key.get(ref)
        return f"t{row['id']}" if row else None

    def edges(name: str) -> list[str]:
        if name[0] == "b":
            refs = kept[int(name[1:])].after or ()
            return [n for n in map(node, refs) if n is not None]
        out = []
        for dep in by_id[name[1:]]["deps"]:
            if dep["dep_id"] is not None and str(dep["dep_id"]) in by_id:
                out.append(f"t{dep['dep_id']}")
            elif dep["ref"] in batch:
                out.append(f"b{batch[dep['ref']]}")
        return out

    def label(name: str) -> str:
        if name[0] == "b":
            t = kept[int(name[1:])]
            return t.key or t.title
        row = by_id[name[1:]]
        return str(row["idem_key"] or row["id"])

    done: set[str] = set()
    for start in (f"b{i}" for i in range(len(kept))):
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = []
        if start in done:
            continue
        stack.append((start, iter(edges(start))))
        path.append(start)
        on_path.add(start)
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.pop()
                on_path.discard(name)
                done.add(name)
            elif nxt in on_path:
                return [label(n) for n in [*path[path.index(nxt) :], nxt]]
            elif nxt not in done:
                stack.append((nxt, iter(edges(nxt))))
                path.append(nxt)
                on_path.add(nxt)
    return None
