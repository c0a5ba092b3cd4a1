import { expect } from "chai";
import { verifyWebhook } from "../../src/webhooks/signature.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { FakeSmsc, eventually, messageText } from "../support/fake-smsc.js";
import { Receiver } from "../support/receivers.js";
import { postSend } from "../support/v1.js";
import { rest } from "../support/rest.js";

type Json = Record<string, unknown>;

describe("V1 verification over SMPP", () => {
  let smsc: FakeSmsc;
  let hooks: Receiver;
  let app: TestApp;

  before(async () => {
    smsc = await FakeSmsc.start();
    hooks = await Receiver.start();
    app = await startTestApp({ SMS_PROVIDER: "smpp", SMPP_URL: smsc.url(), WEBHOOK_BACKOFF_BASE_MS: "50" });
  });
  after(async () => {
    await app.stop();
    await smsc.close();
    await hooks.close();
  });

  it("sends the code by submit_sm and turns the delivery receipt into a signed delivery_status webhook", async () => {
    const { account, apiKey, webhookSecret } = await app.registry.accounts.create({
      name: "Smpp",
      balanceMicros: 1_000_000,
      spendingLimitMicros: 1_000_000,
      features: [],
      regions: [],
    });
    const { body: sent } = await postSend(app.baseUrl, apiKey, {
      customer_uuid: account.customerUuid,
      phone_number: "+33612345678",
      callback_url: hooks.url,
      correlation_id: "smpp-1",
    });
    expect(sent.status).to.equal("pending");

    await eventually(() => smsc.submits.length === 1);
    const submit = smsc.submits[0];
    expect(submit?.destination_addr).to.equal("33612345678");
    expect(messageText(submit?.short_message)).to.match(/\d{6}/);

    // The SMSC's answer gave the message id msg-1; its receipt names it.
    await smsc.deliver({
      source_addr: "33612345678",
      destination_addr: "Ringfence",
      esm_class: 0x04,
      short_message:
        "id:msg-1 sub:001 dlvrd:001 submit date:2611211200 done date:2611211201 stat:DELIVRD err:000 text:",
      receipted_message_id: "msg-1",
      message_state: 2,
    });

    const auth = String(sent.authentication_uuid);
    const received = await hooks.until((r) =>
      r.some((x) => x.body.includes('"delivery_status"') && x.body.includes(auth)),
    );
    const hook = received.find((x) => x.body.includes('"delivery_status"') && x.body.includes(auth));
    const envelope = JSON.parse(hook?.body ?? "{}") as Json;
    expect(envelope).to.deep.include({
      type: "delivery_status",
      correlation_id: "smpp-1",
      payload: { authentication_uuid: auth, attempt: 1, status: "delivered", provider_status: "DELIVRD" },
    });
    const header = String(hook?.headers["x-webhook-signature"]);
    expect(
      verifyWebhook(webhookSecret, hook?.body ?? "", header, 300, Math.floor(Date.now() / 1000)),
    ).to.equal(true);
    expect(
      verifyWebhook("another-secret", hook?.body ?? "", header, 300, Math.floor(Date.now() / 1000)),
    ).to.equal(false);

    const types = received.filter((x) => x.body.includes(auth)).map((x) => (JSON.parse(x.body) as Json).type);
    expect(types).to.deep.equal(["authentication", "attempt", "delivery_status"]);
  });

  it("turns the receipt of a V2 verification's message into a verify.delivery_status naming its attempt", async () => {
    const { apiKey, webhookSecret } = await app.registry.accounts.create({
      name: "Smpp V2",
      balanceMicros: 1_000_000,
      spendingLimitMicros: 1_000_000,
      features: [],
      regions: [],
    });
    const created = await rest(app.baseUrl).post(
      "/v2/verification",
      {
        target: { type: "phone_number", value: "+33612345670" },
        options: { callback_url: hooks.url },
        metadata: { correlation_id: "smpp-2" },
      },
      { authorization: `Bearer ${apiKey}` },
    );
    expect(created.body.status).to.equal("success");
    const id = String(created.body.id);
    await eventually(() => smsc.submits.length === 2);
    await smsc.deliver({
      source_addr: "33612345670",
      destination_addr: "Ringfence",
      esm_class: 0x04,
      short_message:
        "id:msg-2 sub:001 dlvrd:001 submit date:2611211200 done date:2611211201 stat:DELIVRD err:000 text:",
      receipted_message_id: "msg-2",
      message_state: 2,
    });
    const received = await hooks.until((r) => r.filter((x) => x.body.includes(id)).length >= 3);
    const events = received
      .filter((x) => x.body.includes(id))
      .map((x) => {
        expect(verifyWebhook(webhookSecret, x.body, String(x.headers["x-webhook-signature"]))).to.equal(true);
        return JSON.parse(x.body) as { type: string; payload: Json };
      });
    expect(events.map((e) => e.type)).to.deep.equal([
      "verify.authentication",
      "verify.attempt",
      "verify.delivery_status",
    ]);
    const [, attempt, delivery] = events;
    expect(delivery?.payload).to.deep.include({
      attempt_id: attempt?.payload.id,
      verification_id: id,
      status: "delivered",
      target: { type: "phone_number", value: "+33612345670" },
      metadata: { correlation_id: "smpp-2" },
      carrier_information: { mcc: "208", mnc: "09" },
    });
    expect(delivery?.payload.id).to.match(/^dls_/);
  });
});
