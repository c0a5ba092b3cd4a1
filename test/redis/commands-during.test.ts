import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { redisConnections, testRedisUrl } from "../support/hooks.js";
import { commandsDuring } from "../support/redis.js";

/**
 * The MONITOR helper that round-trip tests count commands with. It must see every command of
 * `during`, and nothing may go wrong when other commands stream past as it starts: ioredis's own
 * monitor() then failed with "Command queue state error", unhandled, on a busy machine.
 */
describe("commands seen through MONITOR", () => {
  const connect = redisConnections();

  it("sees every command of its callback while other commands stream past as it starts", async () => {
    const busy = connect();
    const tag = randomBytes(4).toString("hex");
    const streaming = { on: true };
    // Commands in flight without pause: MONITOR's answer and the first lines come in one read.
    const stream = (async () => {
      while (streaming.on) await Promise.all(Array.from({ length: 50 }, (_, i) => busy.ping(`${tag}-${i}`)));
    })();
    try {
      const mine = connect();
      for (let round = 0; round < 20; round += 1) {
        const key = `cmds:${tag}:${round}`;
        const seen = await commandsDuring(testRedisUrl(), async () => {
          for (let i = 0; i < 5; i += 1) await mine.incr(key);
        });
        expect(seen.filter((args) => args[1] === key).map((args) => args[0]?.toLowerCase())).to.deep.equal(
          Array.from({ length: 5 }, () => "incr"),
        );
      }
    } finally {
      streaming.on = false;
      await stream;
    }
  });

  it("reads arguments as they were sent: quotes, backslashes, control characters and UTF-8", async () => {
    const redis = connect();
    const key = `cmds:${randomBytes(4).toString("hex")}`;
    const value = 'a "quoted" \\ back\nslash\r\t\x07\b\x01 é ☎';
    const seen = await commandsDuring(testRedisUrl(), async () => {
      await redis.set(key, value);
    });
    expect(seen.filter((args) => args[1] === key)).to.deep.equal([["set", key, value]]);
  });
});
