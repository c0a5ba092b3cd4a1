import { expect } from "chai";
import { Cluster } from "ioredis";
import { connectRedis, createRedis } from "../../src/redis/client.js";
import { outboxKeys } from "../../src/webhooks/keys.js";
import { startRedisCluster, type RedisCluster } from "../support/redis.js";
import { eventually, Harness } from "../support/webhooks.js";

describe("webhook outbox on a Redis Cluster", () => {
  let cluster: RedisCluster | undefined;
  let harness: Harness | undefined;

  before(async function () {
    this.timeout(60_000);
    cluster = await startRedisCluster();
    const nodes = cluster.nodes.split(",");
    const redis = createRedis({ REDIS_URL: "redis://unused", REDIS_CLUSTER_NODES: nodes });
    await connectRedis(redis);
    const startup = nodes.map((n) => ({ host: n.split(":")[0], port: Number(n.split(":")[1]) }));
    harness = new Harness(
      redis,
      () => new Cluster(startup, { lazyConnect: true, redisOptions: { maxRetriesPerRequest: null } }),
      "{rf:bull}",
    );
  });
  after(async () => {
    // Undefined when `before` failed; its own error is the one to read.
    await harness?.close();
    harness?.redis.disconnect();
    await cluster?.stop();
  });

  it("runs its scripts per hash tag, BullMQ under a hash-tagged prefix, and sweeps every master", async () => {
    const h = harness!;
    expect(h.redis).to.be.instanceOf(Cluster);
    const rx = await h.receiver((_req, i) => (i % 4 === 1 ? 503 : 200));
    const streams = Array.from({ length: 12 }, () => h.stream());
    const expected = new Map<string, string[]>();
    // Streams of many slots: half kicked before start, half left for the recovery sweep.
    for (const list of streams) expected.set(list, await h.append(list, rx.url, 3));
    const slots = new Set(
      await Promise.all(streams.map((l) => (h.redis as Cluster).call("CLUSTER", "KEYSLOT", l))),
    );
    expect(slots.size).to.be.greaterThan(6);
    const masters = (h.redis as Cluster).nodes("master");
    const pendingSets = await Promise.all(masters.map((n) => n.keys(h.keys.key("whpending", "*"))));
    expect(
      pendingSets.filter((sets) => sets.length > 0).length,
      "pending sets on several masters",
    ).to.be.at.least(2);
    expect(() => h.outbox({ queuePrefix: "rf-bull" })).to.throw(/hash tag/);
    const outbox = h.outbox();
    for (const list of streams.slice(0, 6)) await outbox.kick(list);
    await outbox.start();
    const late = streams[0]!;
    expected.get(late)!.push(...(await h.append(late, rx.url)));
    await outbox.kick(late);

    await eventually("every stream delivered", async () => {
      const done = await Promise.all(
        streams.map(async (list) => {
          const k = outboxKeys(list, h.keys);
          const [delivered, pending] = await Promise.all([
            h.redis.get(k.delivered),
            h.redis.sismember(k.pending, list),
          ]);
          return Number(delivered) === expected.get(list)!.length && pending === 0;
        }),
      );
      return done.every(Boolean);
    });
    for (const [list, ids] of expected) {
      expect(
        rx.accepted().filter((id) => ids.includes(id)),
        list,
      ).to.deep.equal(ids);
    }
    const bullKeys = (await Promise.all(masters.map((n) => n.keys("{rf:bull}:*")))).flat();
    expect(bullKeys).to.not.be.empty;
  });
});
