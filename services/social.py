"""Social: four platforms behind one publish call, with the read paths real platforms have.

Mastodon honours an ``Idempotency-Key`` (for one hour, as the real server stores it); the other
platforms ignore keys. Weibo's listing shows a post only three minutes after it commits, and X
offers no read path at all (free API tiers cannot read timelines).
"""

from __future__ import annotations

from typing import Any, Literal

from limbo.sim.results import Result, error, ok
from limbo.sim.service import (
    DAY_S,
    OpContext,
    ReadBack,
    Service,
    VersionedTable,
    View,
    read,
    service,
    write,
)

Platform = Literal["mastodon", "weibo", "linkedin", "x"]
LIST_LAG: dict[str, float | None] = {"mastodon": 0.0, "linkedin": 0.0, "weibo": 180.0, "x": None}


def _posts_lag(args: dict[str, Any]) -> float | None:
    return LIST_LAG[args["platform"]]


@service("social")
class Social(Service):
    def __init__(self, seed: int | str) -> None:
        super().__init__(seed)
        self.posts = VersionedTable()

    @write(
        native_key=lambda a: a["platform"] == "mastodon",
        key_note=("idempotency_key is honoured by mastodon only (a repeat with the same key and "
                  "the same arguments within 1 h returns the first result; the same key with "
                  "other arguments returns 422); other platforms ignore it."),
        key_ttl_native=lambda a: 3600.0 if a["platform"] == "mastodon" else DAY_S,
        readback=lambda a: ReadBack("list_posts", {"platform": a["platform"], "limit": 50},
                                    {"text": a["text"]}),
    )
    def publish(self, ctx: OpContext, platform: Platform, text: str) -> Result:
        """Publish a post to a social platform (mastodon, weibo, linkedin, x). Returns the new
        post_id. On weibo a new post takes up to 180 s to appear in social_list_posts; posts on
        x cannot be listed at all."""
        post_id = self.mint("post")
        self.posts.put(post_id, {"post_id": post_id, "platform": platform, "text": text}, ctx.now)
        ctx.commit({"platform": platform, "text": text}, post_id)
        return ok(post_id=post_id, platform=platform)

    @read(lag=_posts_lag, note="Shows new posts at once on mastodon and linkedin; on weibo new "
                               "posts take up to 180 s to appear; not available for x.")
    def list_posts(self, view: View, platform: Platform, limit: int = 20) -> Result:
        """List the most recent posts on a platform, newest first."""
        rows = [r for _, r in self.posts.scan(view) if r["platform"] == platform]
        return ok(items=rows[::-1][:limit])

    @write(idempotency="natural", readback=lambda a: None)
    def delete_post(self, ctx: OpContext, platform: Platform, post_id: str) -> Result:
        """Delete one of your posts by id. Deleting a post that does not exist returns 404."""
        row = self.posts.current(post_id)
        if row is None or row["platform"] != platform:
            return error("not_found", f"no post {post_id} on {platform}")
        self.posts.put(post_id, None, ctx.now)
        ctx.commit({"platform": platform, "post_id": post_id}, post_id, reverses=post_id)
        return ok(deleted=post_id)
