import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { startTestApp, TEST_SECRETS_KEY, type TestApp } from "../support/app.js";
import { serveExpectingExit, startServiceProcess } from "../support/service-process.js";
import { keysAddedSince, keysUnder } from "../support/redis.js";

describe("SECRETS_KEY against the data in Redis", function () {
  // Each start is a fresh Node process compiling TypeScript.
  this.timeout(60_000);
  let app: TestApp;
  let env: Record<string, string>;

  before(async () => {
    app = await startTestApp();
    env = {
      REDIS_URL: app.config.REDIS_URL,
      REDIS_KEY_PREFIX: app.config.REDIS_KEY_PREFIX,
      // Real providers, so that the start warns of nothing and stderr holds only its own lines.
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: "http://127.0.0.1:9/sms",
      EMAIL_PROVIDER: "http",
      EMAIL_HTTP_URL: "http://127.0.0.1:9/mail",
    };
  });
  after(async () => {
    await app.stop();
  });

  it("stores a check value that is not the key, and the same key starts the service again", async () => {
    const stored = await app.registry.redis.get(app.registry.keys.key("secrets", "check"));
    expect(stored).to.match(/^[0-9a-f]{64}$/);
    expect(stored).to.not.include(Buffer.from(TEST_SECRETS_KEY, "base64").toString("hex"));
    const again = await startServiceProcess({ ...env, SECRETS_KEY: TEST_SECRETS_KEY });
    try {
      expect((await fetch(`${again.baseUrl}/.well-known/jwks.json`)).status).to.equal(200);
    } finally {
      await again.kill();
    }
  });

  it("stops the service's start with one line naming SECRETS_KEY when the data was sealed with another", async () => {
    const before = await keysUnder(app.registry.redis, app.config.REDIS_KEY_PREFIX);
    const other = randomBytes(32).toString("base64");
    const r = await serveExpectingExit({ ...env, SECRETS_KEY: other });
    expect(r.code).to.equal(2);
    expect(r.stderr).to.deep.equal([
      `ringfence: invalid SECRETS_KEY: the data in Redis under REDIS_KEY_PREFIX "${app.config.REDIS_KEY_PREFIX}" was sealed with another SECRETS_KEY`,
    ]);
    expect(await keysAddedSince(app.registry.redis, app.config.REDIS_KEY_PREFIX, before)).to.deep.equal([]);
  });

  it("lets the first start on fresh data choose the key, and refuses another one after it", async () => {
    const prefix = `t${randomBytes(4).toString("hex")}:`;
    const first = randomBytes(32).toString("base64");
    const started = await startTestApp({ REDIS_KEY_PREFIX: prefix, SECRETS_KEY: first });
    await started.stop();
    let refused: unknown;
    try {
      const other = await startTestApp({ REDIS_KEY_PREFIX: prefix, SECRETS_KEY: TEST_SECRETS_KEY });
      await other.stop();
    } catch (err) {
      refused = err;
    }
    expect(refused)
      .to.be.an("error")
      .with.property("message")
      .that.matches(/^invalid SECRETS_KEY: /);
  });
});
