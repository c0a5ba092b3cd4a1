import { installFetchRecorder, setCurrentTest, violations } from "./ding-contract.js";
import { Redis } from "ioredis";
import { startRedis, type RedisServer } from "./redis.js";

let redis: RedisServer | undefined;

/** The Redis of this test run: started once by the run itself, on a port below the ephemeral range (support/ports.ts). */
export function testRedisUrl(): string {
  if (redis === undefined) throw new Error("the test Redis is not running");
  return redis.url;
}

/**
 * Connections to the test Redis for one describe block, each its own client, all disconnected
 * after the block: call it inside `describe`.
 */
export function redisConnections(): () => Redis {
  const conns: Redis[] = [];
  after(() => {
    for (const c of conns.splice(0)) c.disconnect();
  });
  return () => {
    const r = new Redis(testRedisUrl());
    conns.push(r);
    return r;
  };
}

// Every V1 answer a test receives is checked against the original SDKs' models.
installFetchRecorder();

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(20_000);
    redis = await startRedis();
  },
  beforeEach(this: Mocha.Context) {
    setCurrentTest(this.currentTest?.fullTitle() ?? "");
  },
  async afterAll() {
    await redis?.stop();
    if (violations.length > 0) {
      const lines = violations.slice(0, 50).map((v) => `  ${v.test}\n    ${v.problem}`);
      throw new Error(`${violations.length} V1 answers the original SDKs would refuse:\n${lines.join("\n")}`);
    }
  },
};
