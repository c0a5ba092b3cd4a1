import { startRedis, type RedisServer } from "./redis.js";

let redis: RedisServer | undefined;

/** The Redis of this test run: started once by the run itself, on a free port. */
export function testRedisUrl(): string {
  if (redis === undefined) throw new Error("the test Redis is not running");
  return redis.url;
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(20_000);
    redis = await startRedis();
  },
  async afterAll() {
    await redis?.stop();
  },
};
