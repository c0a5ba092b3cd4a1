import { expect } from "chai";
import { silentLogger } from "../../src/log.js";
import { openRegistry, type Registry } from "../../src/app.js";
import { cliEnv, testConfig } from "../support/app.js";
import { GraphFake, whatsappEntry, type GraphNumber } from "../support/graph-fake.js";
import { startRedis, waitFor, type RedisServer } from "../support/redis.js";
import { rest } from "../support/rest.js";
import { SmsReceiver } from "../support/receivers.js";
import { SmsFake } from "../support/routing.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";
import { fundedAccount } from "../support/v1.js";

const NUMBER: GraphNumber = {
  phoneNumberId: "106540352242922",
  token: "EAAGraphToken-0123456789abcdef",
  appSecret: "app-secret-0123456789abcdef",
};

/**
 * docs/v2-api.md#fallback (9.3, Done when: a fallback after the scheduling instance is killed still
 * happens exactly once): two instances of `ringfence serve` on one Redis; the one that sent a
 * WhatsApp code is SIGKILLed before CHANNEL_FALLBACK_SECONDS pass, and the other carries out the
 * fallback to SMS, once, charging it once.
 */
describe("V2 channels: a scheduled fallback survives the instance that scheduled it (9.3)", function () {
  this.timeout(120_000);
  let redis: RedisServer;
  let registry: Registry;
  let graph: GraphFake;
  let alpha: SmsFake;
  const instances: ServiceProcess[] = [];

  before(async () => {
    redis = await startRedis();
    graph = await GraphFake.start([NUMBER]);
    alpha = await SmsFake.start();
  });
  after(async () => {
    for (const i of instances) await i.kill();
    await registry.redis.quit().catch(() => undefined);
    await Promise.all([graph.close(), alpha.close()]);
    await redis.stop();
  });

  it("sends the SMS exactly once from the surviving instance", async () => {
    const config = testConfig({ REDIS_URL: redis.url });
    registry = await openRegistry(config, silentLogger);
    const { account, apiKey } = await fundedAccount(registry.accounts, "Crash", 100_000_000);
    await registry.accounts.setChannels(account.customerUuid, ["whatsapp", "sms"]);
    const env = {
      ...cliEnv(config),
      LOG_LEVEL: "warn",
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url },
        whatsappEntry("wa", graph, NUMBER, "verify-token-0123456789"),
      ]),
      CHANNEL_FALLBACK_SECONDS: "3",
    };
    const [sender, survivor] = await Promise.all([startServiceProcess(env), startServiceProcess(env)]);
    instances.push(sender, survivor);
    const before = (await registry.accounts.get(account.customerUuid))?.balanceMicros ?? 0;

    const phone = "+33612900000";
    const created = await rest(sender.baseUrl).call("POST", "/v2/verification", {
      body: { target: { type: "phone_number", value: phone } },
      bearer: apiKey,
    });
    expect(created.body, created.text).to.include({ status: "success" });
    await sender.kill();
    const [m] = graph.messages;
    const code = m?.body.template.components[0].parameters[0]?.text;

    const sms = await alpha.received(phone, 30_000);
    expect(SmsReceiver.code(sms), "the same code").to.equal(code);
    // Taken once: nothing waits any more, and no second SMS came.
    await waitFor(async () => (await registry.redis.zcard(registry.verify.keys.fallbacks())) === 0);
    expect(alpha.to(phone)).to.have.length(1);
    await waitFor(
      async () =>
        before - ((await registry.accounts.get(account.customerUuid))?.balanceMicros ?? 0) ===
        30_000 + 50_000,
    );
    const checked = await rest(survivor.baseUrl).call("POST", "/v2/verification/check", {
      body: { target: { type: "phone_number", value: phone }, code },
      bearer: apiKey,
    });
    expect(checked.body.status, checked.text).to.equal("success");
  });
});
