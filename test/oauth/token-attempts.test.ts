import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { Keys } from "../../src/redis/client.js";
import { TokenFailures } from "../../src/oauth/failures.js";
import type { WindowRule } from "../../src/otp/code.js";
import { redisConnections, testRedisUrl } from "../support/hooks.js";
import { commandsDuring } from "../support/redis.js";

/**
 * Failed client authentications at the token endpoint (TOKEN_FAILURES_CLIENT, TOKEN_FAILURES_IP),
 * counted on the failure path only: concurrent failures, from any number of processes, get at
 * most the limit's worth of 401 between them, and a flood of them from a full window costs Redis
 * nothing each.
 */
describe("failed token attempts in their windows", () => {
  const connect = redisConnections();

  /** `processes` failure counters on connections of their own, over one key prefix. */
  function processes(n: number, rules: { perClient: WindowRule; perAddress: WindowRule }) {
    const keys = new Keys(`att${randomBytes(4).toString("hex")}:`);
    return Array.from({ length: n }, () => new TokenFailures(connect(), keys, rules));
  }

  /** How many of `n` concurrent failures, spread over `counters`, were let through to a 401. */
  async function allowed(
    counters: TokenFailures[],
    n: number,
    clientId: string | undefined,
    address: string,
  ) {
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) => counters[i % counters.length]!.failed(clientId, address)),
    );
    for (const refusal of answers.filter((a) => a !== undefined)) {
      expect(refusal.code).to.equal("too_many_attempts");
      expect(Number(refusal.headers["retry-after"])).to.be.within(1, 61);
    }
    return answers.filter((a) => a === undefined).length;
  }

  it("lets exactly TOKEN_FAILURES_IP failures of 60 concurrent ones from two processes through", async () => {
    const two = processes(2, { perClient: null, perAddress: { limit: 5, windowSeconds: 60 } });
    expect(await allowed(two, 60, undefined, "198.51.100.7")).to.equal(5);
    // Another address has a window of its own.
    expect(await allowed(two, 1, undefined, "203.0.113.9")).to.equal(1);
  });

  it("lets exactly TOKEN_FAILURES_CLIENT failures of 60 concurrent ones, from many addresses, through", async () => {
    const two = processes(2, { perClient: { limit: 3, windowSeconds: 60 }, perAddress: null });
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => two[i % 2]!.failed("rfc_someone", `198.51.100.${i + 1}`)),
    );
    expect(answers.filter((a) => a === undefined)).to.have.length(3);
  });

  it("refuses failures meeting a window it saw full without a Redis command, until a place frees", async () => {
    const [one] = processes(1, { perClient: null, perAddress: { limit: 2, windowSeconds: 60 } });
    expect(await allowed([one!], 3, undefined, "198.51.100.8")).to.equal(2);
    const seen = await commandsDuring(testRedisUrl(), async () => {
      expect(await allowed([one!], 50, undefined, "198.51.100.8")).to.equal(0);
    });
    expect(seen).to.deep.equal([]);
  });
});
