import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { Redis } from "ioredis";
import { Keys } from "../../src/redis/client.js";
import { SessionStore, type Grant } from "../../src/session/sessions.js";
import { PASSWORD_SCOPE } from "../../src/session/identity.js";
import { testRedisUrl } from "../support/hooks.js";

const RESET = { scope: PASSWORD_SCOPE, jti: "jti-reset", passwordHash: "$argon2id$test" };

async function until(pred: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("the session store's index of a user's sessions", () => {
  let redis: Redis;
  let keys: Keys;
  const userId = () => `usr_${randomBytes(16).toString("base64url")}`;
  const grant = (): Grant => ({ scope: PASSWORD_SCOPE, untilMs: Date.now() + 60_000, mode: "session" });

  before(() => {
    redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: 2 });
  });
  after(() => {
    redis.disconnect();
  });
  beforeEach(() => {
    keys = new Keys(`t${randomBytes(6).toString("hex")}:`);
  });

  it("ends a session opened while a password change was reading the index", async () => {
    // Real Redis; a login of the same user runs between the change's read of the index and its script.
    let interleave: (() => Promise<void>) | undefined;
    const client = new Proxy(redis, {
      get(target, prop) {
        if (prop === "zrangebyscore") {
          return async (...args: Parameters<Redis["zrangebyscore"]>) => {
            const read = await target.zrangebyscore(...args);
            const step = interleave;
            interleave = undefined;
            if (step !== undefined) await step();
            return read;
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const sessions = new SessionStore(client, keys, 60_000);
    const user = userId();
    const changing = await sessions.open(user, "app_a", "jti-reset", { amr: ["otp"], grant: grant() });
    const earlier = await sessions.open(user, "app_a", "jti-1", { amr: ["otp"] });
    let late = "";
    interleave = async () => {
      ({ sessionId: late } = await sessions.open(user, "app_a", "jti-2", { amr: ["otp", "sms"] }));
    };
    const reset = await sessions.resetPassword(user, changing.sessionId, RESET);
    expect(reset.outcome).to.equal("ok");
    expect(reset.outcome === "ok" ? [...reset.ended].sort() : []).to.deep.equal(
      [earlier.sessionId, late].sort(),
    );
    expect(await sessions.alive(user, earlier.sessionId)).to.equal(false);
    expect(await sessions.alive(user, late)).to.equal(false);
    expect(await sessions.alive(user, changing.sessionId)).to.equal(true);
    expect(await redis.zrange(keys.key("sessions", user), "0", "-1")).to.deep.equal([changing.sessionId]);
  });

  it("leaves no live session out of the index when logins race a password change", async () => {
    const sessions = new SessionStore(redis, keys, 60_000);
    const user = userId();
    const changing = await sessions.open(user, "app_a", "jti-reset", { amr: ["otp"], grant: grant() });
    const opened = await Promise.all(
      Array.from({ length: 5 }, (_, i) => sessions.open(user, "app_a", `jti-${i}`, { amr: ["otp"] })),
    );
    const racingLogins = Promise.all(
      Array.from({ length: 20 }, (_, i) => sessions.open(user, "app_a", `jti-r${i}`, { amr: ["otp"] })),
    );
    const [reset, racing] = await Promise.all([
      sessions.resetPassword(user, changing.sessionId, RESET),
      racingLogins,
    ]);
    expect(reset.outcome).to.equal("ok");
    for (const s of opened) expect(await sessions.alive(user, s.sessionId)).to.equal(false);
    const indexed = new Set(await redis.zrange(keys.key("sessions", user), "0", "-1"));
    for (const s of [changing, ...racing]) {
      expect(indexed.has(s.sessionId)).to.equal(await sessions.alive(user, s.sessionId));
    }
    expect(indexed.has(changing.sessionId)).to.equal(true);
  });

  it("drops ended and expired sessions, and expires with the last of them", async () => {
    const sessions = new SessionStore(redis, keys, 300);
    const user = userId();
    const index = keys.key("sessions", user);
    const first = await Promise.all(
      [1, 2, 3].map((i) => sessions.open(user, "app_a", `j${i}`, { amr: ["otp"] })),
    );
    expect(await sessions.end(user, first[0]?.sessionId ?? "")).to.equal(true);
    expect(await redis.zcard(index)).to.equal(2);
    await until(async () => !(await sessions.alive(user, first[2]?.sessionId ?? "")));
    const next = await sessions.open(user, "app_a", "j4", { amr: ["otp"] });
    expect(await redis.zrange(index, "0", "-1")).to.deep.equal([next.sessionId]);
    expect(await redis.pttl(index)).to.be.within(1, 300);
    await until(async () => (await redis.exists(index)) === 0);
  });
});
