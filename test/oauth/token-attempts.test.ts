import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { Keys } from "../../src/redis/client.js";
import { AuthFailures, WAIT_POLL_MS, type AddressAttempt } from "../../src/oauth/client-credentials.js";
import { RingfenceError } from "../../src/errors.js";
import { testRedisUrl } from "../support/hooks.js";
import { commandsDuring, waitFor } from "../support/redis.js";

/**
 * The line of token attempts waiting for a place of one address (TOKEN_FAILURES_IP): an attacker
 * who fills it from one address gets 429 at once past its length, and a long line costs Redis
 * what one waiter costs.
 */
describe("token attempts waiting for a place of their address", () => {
  const conns: Redis[] = [];
  const connect = () => {
    const r = new Redis(testRedisUrl());
    conns.push(r);
    return r;
  };
  after(() => {
    for (const c of conns.splice(0)) c.disconnect();
  });

  function failures(maxWaiting: number) {
    const redis = connect();
    const keys = new Keys(`att${randomBytes(4).toString("hex")}:`);
    const rules = { perClient: null, perAddress: { limit: 1, windowSeconds: 60 } };
    return new AuthFailures(redis, redis, keys, rules, maxWaiting);
  }

  /** Ends `holder`'s attempt and each one its place passes to, as they get it; all must get one. */
  async function passAlong(holder: AddressAttempt, waiting: Promise<AddressAttempt>[]): Promise<void> {
    const left = new Map(waiting.map((p, i) => [i, p.then((attempt) => ({ i, attempt }))]));
    let current = holder;
    while (left.size > 0) {
      await current.succeed();
      const next = await Promise.race(left.values());
      left.delete(next.i);
      current = next.attempt;
    }
    await current.succeed();
  }

  it("refuses an attempt past the line's length with 429 at once, and gives each waiter a place", async () => {
    const f = failures(3);
    const holder = await f.beginAttempt("198.51.100.7");
    const line = [1, 2, 3].map(() => f.beginAttempt("198.51.100.7"));
    // Each looks in Redis once before it joins the line: a busy machine takes its time.
    await waitFor(() => Promise.resolve(f.waitingFrom("198.51.100.7") === 3));
    let refused: unknown;
    try {
      await f.beginAttempt("198.51.100.7");
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(RingfenceError);
    expect((refused as RingfenceError).code).to.equal("too_many_attempts");
    // Another address has a line of its own.
    await (await f.beginAttempt("203.0.113.9")).succeed();
    await passAlong(holder, line);
  });

  it("looks in Redis from the first in line only, whatever the line's length", async () => {
    const f = failures(256);
    const holder = await f.beginAttempt("198.51.100.8");
    const line = Array.from({ length: 20 }, () => f.beginAttempt("198.51.100.8"));
    await waitFor(() => Promise.resolve(f.waitingFrom("198.51.100.8") === 20));
    const started = Date.now();
    const seen = await commandsDuring(
      testRedisUrl(),
      () => new Promise((resolve) => setTimeout(resolve, 200)),
    );
    const watchedMs = Date.now() - started;
    const looks = seen.filter((args) => ["evalsha", "eval"].includes((args[0] ?? "").toLowerCase()));
    // One look per WAIT_POLL_MS at most from the first in line, over however long the machine
    // took to watch (about 40 in 200 ms); every waiter looking would be 20 times that.
    expect(looks.length).to.be.at.most(Math.ceil(watchedMs / WAIT_POLL_MS) + 1);
    await passAlong(holder, line);
  });
});
