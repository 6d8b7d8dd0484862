"""The loops of a gfx942 listing as a control-flow graph sees them (tilegate/gfx942/inner_loop.py
picks one).

A loop is a strongly connected set of basic blocks. Address spans (a backward branch and its
target) are not enough: LLVM lays a loop out rotated, entered in its middle, and moves a
conditional part of it (the prefetch of the next key block, under ``kb + 1 < n_blocks``) past the
branch that closes the rest, with a branch of its own back. Loops nest as in a loop-nesting forest:
within a loop, the edges back into its header (the block the loop is entered by) are cut, and what
still cycles are its inner loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BRANCHES = ("s_branch", "s_cbranch")
ENDS = ("s_endpgm", "s_setpc_b64")  # no fall-through (the kernels here make no calls)


@dataclass(frozen=True)
class Block:
    first: int  # index of its first instruction in the listing
    last: int  # index of its last
    successors: tuple[int, ...]  # indices (into the block list) of the blocks it may go to


@dataclass
class Loop:
    blocks: frozenset[int]  # block indices
    header: int  # the block the loop is entered by
    inner: list[Loop] = field(default_factory=list)

    def own_blocks(self) -> set[int]:
        return set(self.blocks) - {b for loop in self.inner for b in loop.blocks}


def basic_blocks(code) -> list[Block]:
    """``code``: tilegate.gfx942.inner_loop.Instruction list, in address order."""
    index_of = {ins.address: i for i, ins in enumerate(code)}
    leaders = {0}
    for i, ins in enumerate(code):
        name = ins.text.split()[0]
        if name.startswith(BRANCHES) or name in ENDS:
            leaders.add(i + 1)
            if ins.target in index_of:
                leaders.add(index_of[ins.target])
    starts = sorted(s for s in leaders if s < len(code))
    block_at = {s: b for b, s in enumerate(starts)}
    blocks = []
    for b, start in enumerate(starts):
        last = (starts[b + 1] if b + 1 < len(starts) else len(code)) - 1
        ins = code[last]
        name = ins.text.split()[0]
        succ = []
        if name.startswith(BRANCHES) and ins.target in index_of:
            succ.append(block_at[index_of[ins.target]])
        if not (name == "s_branch" or name in ENDS) and b + 1 < len(starts):
            succ.append(b + 1)
        blocks.append(Block(start, last, tuple(succ)))
    return blocks


def _sccs(nodes: set[int], edges: dict[int, list[int]]) -> list[set[int]]:
    """Strongly connected components of the subgraph on ``nodes`` (iterative Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(edges.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in nodes:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges.get(nxt, ()))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.add(top)
                    if top == node:
                        break
                out.append(comp)
    return out


def _loops_in(nodes: set[int], edges: dict[int, list[int]]) -> list[Loop]:
    found = []
    for comp in _sccs(nodes, edges):
        if len(comp) == 1 and next(iter(comp)) not in edges.get(next(iter(comp)), ()):
            continue  # a block that is no loop
        entered = sorted(b for b in comp if any(b in edges.get(p, ()) for p in set(edges) - comp))
        header = entered[0] if entered else min(comp)
        # the loop's back edges
        cut = {b: [s for s in edges.get(b, ()) if s != header] for b in comp}
        found.append(Loop(frozenset(comp), header, _loops_in(comp - {header}, cut)))
    return found


def loop_forest(blocks: list[Block]) -> list[Loop]:
    """The outermost loops, each with its inner loops."""
    edges = {b: list(block.successors) for b, block in enumerate(blocks)}
    return _loops_in(set(range(len(blocks))), edges)


def all_loops(forest: list[Loop]) -> list[Loop]:
    out = []
    for loop in forest:
        out += [loop, *all_loops(loop.inner)]
    return out


def execution_order(blocks: list[Block], loop: Loop) -> list[int]:
    """The loop's blocks in an order one iteration can run them: a reverse postorder from its header
    over the loop's own edges, those back into the header left out, so that each block comes after
    every block that leads to it within the iteration (both sides of a branch are kept). Address
    order is not that: LLVM lays a conditional prefetch past the compute it runs before."""
    seen, post = {loop.header}, []
    work = [(loop.header, iter(blocks[loop.header].successors))]
    while work:
        node, it = work[-1]
        nxt = next((s for s in it if s in loop.blocks and s not in seen and s != loop.header), None)
        if nxt is None:
            work.pop()
            post.append(node)
        else:
            seen.add(nxt)
            work.append((nxt, iter(blocks[nxt].successors)))
    order = post[::-1]
    # blocks the header does not reach (a second entry)
    return order + sorted(loop.blocks - set(order))
