"""Per-point notes as the default screen says them: what holds alike at many points, once, with its count."""

from __future__ import annotations

from specmeter.report.grid import Note


def collapse(items: list[Note]) -> list[Note]:
    """The notes as the default screen says them: what is said alike of several points, once, with how many;
    a check that holds at only some of its points also names the points where it did not (their own notes,
    the ones a person must read, follow in full). Notes about no point pass as they are, in order."""
    checked: dict[str, list[str]] = {}  # check -> every point it reports on, in order
    alike: dict[tuple[str, str, bool], list[Note]] = {}
    for n in items:
        if n.config is None or n.point is None:
            continue
        if n.check is not None and (where := f"{n.config} @ {n.point}") not in checked.setdefault(n.check, []):
            checked[n.check].append(where)
        alike.setdefault((n.check or n.config, n.body, n.warn), []).append(n)
    out: list[Note] = []
    for n in items:
        if n.config is None or n.point is None:
            out.append(n)
            continue
        key = (n.check or n.config, n.body, n.warn)
        same = alike.pop(key, None)
        if same is None:  # said already, with the first of its kind
            continue
        if n.check is not None and not n.warn:
            here = {f"{m.config} @ {m.point}" for m in same}
            every = checked[n.check]
            text = f"{n.check}: {n.body} at {len(here)} of {len(every)} point" + ("s" if len(every) > 1 else "")
            others = [w for w in every if w not in here]
            out.append(Note(text + ("; not at " + ", ".join(others) if others else "")))
        elif len(same) == 1:
            out.append(n)
        else:
            points = ", ".join(f"{m.point}" if n.check is None else f"{m.config} @ {m.point}" for m in same)
            out.append(Note(f"{key[0]} at {len(same)} points" + (f" ({points})" if n.warn else "") + f": {n.body}",
                            n.warn))
    return out
