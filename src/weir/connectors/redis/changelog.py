"""The change feed in Redis (``weir.state.changelog.retain``): three more keys per namespace, one slot.

Layout of namespace ``ns`` (``{ns}…`` in Redis Cluster, so the feed lives in the namespace's hash
slot and every script touches one slot):

=========================  =====================================================================
key                        content
=========================  =====================================================================
``ns$changes$<txid>``      hash: changed key → its before- and after-image (:func:`decode_entry`)
``ns$changes``             sorted set of the logged txids (member and score: the txid)
``ns$changelog``           hash: ``since`` (the first logged txid), ``retain``
=========================  =====================================================================

The commit is a chunked Lua script (:mod:`weir.connectors.redis.kv`): each script moves up to
``COMMIT_CHUNK`` entries out of the prepared set into the rows. With the feed on, the **same
script** first writes each of those keys' before-image (its committed value, read then) and
after-image into ``ns$changes$<txid>``. So an entry is either still prepared and not logged, or
applied and logged: a SIGKILL between two scripts leaves the txid prepared with the entries not yet
moved, and recovery's roll-forward (a ``COMMITTING`` txid is always committed) moves and logs
exactly those. The last script records the txid as committed, and in that step adds the txid to
``ns$changes``, records ``since``/``retain`` and deletes the change sets of txids up to
``txid - retain``. Readers only ask for committed txids, so a change set being filled is never read.

An entry is ``<len(B)>:<B><A>`` where ``B`` and ``A`` are tagged images: ``=`` + value, or ``-``
(absent before / deleted after).
"""

from __future__ import annotations

from weir.state.changelog import ChangeRow

__all__ = ["LOG_FUNCTIONS", "LOG_RECORD", "changes_key", "decode_entry", "feed_keys"]

#: Lua: log the before-/after-images of ``arr`` ([k1, tag1, k2, tag2, ...], tags as in the prepared
#: set) into KEYS[4], reading the before-images from the rows (KEYS[1]) in HMGETs of 2,000 keys
LOG_FUNCTIONS = """
local function log_images(arr)
  local n = #arr
  local i = 1
  while i <= n do
    local j = math.min(i + 3999, n)
    local ks, nk = {}, 0
    for x = i, j, 2 do nk = nk + 1 ks[nk] = arr[x] end
    local olds = redis.call('HMGET', KEYS[1], unpack(ks, 1, nk))
    local out, no = {}, 0
    for y = 1, nk do
      local b = olds[y]
      local bt = '-'
      if b then bt = '=' .. b end
      out[no + 1] = ks[y]
      out[no + 2] = #bt .. ':' .. bt .. arr[i + 2 * y - 1]
      no = no + 2
    end
    redis.call('HSET', KEYS[4], unpack(out, 1, no))
    i = j + 1
  end
end
"""
#: Lua, in the script that records the commit: the txid indexed, the feed's range, old txids pruned
#: (KEYS[5] the txid index, KEYS[6] the range hash, KEYS[7..] the change sets to delete; ARGV[4] retain)
LOG_RECORD = """
redis.call('ZADD', KEYS[5], tonumber(ARGV[2]), ARGV[2])
redis.call('HSETNX', KEYS[6], 'since', ARGV[2])
redis.call('HSET', KEYS[6], 'retain', ARGV[4])
for i = 7, #KEYS do redis.call('DEL', KEYS[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[4]))
"""


def feed_keys(base: bytes) -> tuple[bytes, bytes]:
    """``(txid index, range hash)`` of the namespace whose rows key is ``base``."""
    return base + b"$changes", base + b"$changelog"


def changes_key(base: bytes, txid: int) -> bytes:
    """The hash of txid ``txid``'s change set."""
    return base + b"$changes$" + str(int(txid)).encode()


def _image(tagged: bytes) -> bytes | None:
    if tagged == b"-":
        return None
    if tagged[:1] != b"=":
        msg = f"a change-feed image {tagged[:20]!r} that is neither '=value' nor '-'"
        raise ValueError(msg)
    return tagged[1:]


def decode_entry(txid: int, key: bytes, entry: bytes) -> ChangeRow:
    """One logged change from its stored entry ``<len(B)>:<B><A>``; ValueError when weir did not write it."""
    head, sep, rest = entry.partition(b":")
    if not sep or not head.isdigit() or int(head) > len(rest):
        msg = f"a change-feed entry {entry[:20]!r} that is not '<length>:<before><after>'"
        raise ValueError(msg)
    n = int(head)
    return ChangeRow(txid, key, _image(rest[:n]), _image(rest[n:]))
