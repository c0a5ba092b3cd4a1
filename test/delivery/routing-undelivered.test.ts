import { expect } from "chai";
import { fundedAccount, postSend } from "../support/v1.js";
import { FakeSmsc, messageText } from "../support/fake-smsc.js";
import { rest } from "../support/rest.js";
import { waitFor } from "../support/redis.js";
import { SmsReceiver, type SmsMessage } from "../support/receivers.js";
import { SmsFake, startRoutedApp, type RoutedApp } from "../support/routing.js";
import { authUuidOfVerification } from "../../src/verify/events.js";

const PRICE = 50_000; // SMS_PRICES' default, 0.05
const ALPHA_TOKEN = "alpha-status-token-0123456789abcdef";
const BETA_TOKEN = "beta-status-token-0123456789abcdef";

/**
 * docs/routing.md#undelivered (9.2, row "Undelivered", and Details: at most one re-send per
 * attempt; every message reported undelivered or rejected is refunded, a re-sent one too; repeats
 * change nothing): sigma (SMPP) is first in declared order, alpha and beta (http, with delivery
 * reports) follow; a route sends +33613 numbers through alpha then beta.
 */
describe("delivery: an undelivered message is refunded and its code re-sent once (9.2 row Undelivered)", () => {
  let app: RoutedApp;
  let smsc: FakeSmsc;
  let alpha: SmsFake;
  let beta: SmsFake;
  let customer: { uuid: string; key: string };
  let sigmaNumber = 612_600_000;
  let httpNumber = 613_600_000;
  /** A number the declared order sends through sigma first. */
  const viaSigma = () => `+33${(sigmaNumber += 1000)}`;
  /** A number the +33613 route sends through alpha first. */
  const viaAlpha = () => `+33${(httpNumber += 1000)}`;

  before(async function () {
    this.timeout(30_000);
    smsc = await FakeSmsc.start();
    alpha = await SmsFake.start();
    beta = await SmsFake.start();
    app = await startRoutedApp({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "sigma", url: smsc.url() },
        { name: "alpha", url: alpha.url, status_token: ALPHA_TOKEN },
        { name: "beta", url: beta.url, status_token: BETA_TOKEN },
      ]),
      OTP_RETRY_INTERVAL_SECONDS: "0",
    });
    await app.setRoute({
      channel: "sms",
      destination: "+33613",
      providers: ["alpha", "beta"],
      strategy: "failover",
    });
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Undelivered", 100_000_000);
    customer = { uuid: account.customerUuid, key: apiKey };
  });
  after(async () => {
    await app.stop();
    await Promise.all([smsc.close(), alpha.close(), beta.close()]);
  });

  const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? Number.NaN;
  const sendV1 = async (phone: string): Promise<string> => {
    const r = await postSend(app.baseUrl, customer.key, {
      customer_uuid: customer.uuid,
      phone_number: phone,
    });
    expect([r.status, r.body.status], r.text).to.deep.equal([200, "pending"]);
    return String(r.body.authentication_uuid);
  };
  const check = (auth: string, code: string) =>
    rest(app.baseUrl).post(
      "/v1/check",
      { customer_uuid: customer.uuid, authentication_uuid: auth, check_code: code },
      { "x-api-key": customer.key },
    );
  /** An http provider's delivery report; it is answered once the service has acted on it. */
  const report = async (provider: "alpha" | "beta", reference: string, status: string) => {
    const r = await rest(app.baseUrl).call("POST", `/v1/delivery/status/${provider}`, {
      body: { reference, status },
      bearer: provider === "alpha" ? ALPHA_TOKEN : BETA_TOKEN,
    });
    expect(r.status, r.text).to.equal(204);
  };
  /** An SMPP receipt for the message the SMSC answered with `messageId`. */
  const receipt = (to: string, messageId: string, stat: "UNDELIV" | "DELIVRD") =>
    smsc.deliver({
      source_addr: to.slice(1),
      destination_addr: "Ringfence",
      esm_class: 0x04,
      short_message: `id:${messageId} sub:001 dlvrd:000 submit date:2611211200 done date:2611211201 stat:${stat} err:000 text:`,
      receipted_message_id: messageId,
      message_state: stat === "UNDELIV" ? 5 : 2,
    });
  const deliveryStatuses = async (auth: string) =>
    ((await app.registry.verify.get(customer.uuid, auth))?.events ?? []).filter((e) =>
      e.type.endsWith("delivery_status"),
    );
  /** Waits until `provider` keeps the re-sent message's id for its reports. */
  const remembered = (provider: string, m: SmsMessage) =>
    waitFor(async () => (await app.registry.verify.messageOwner(provider, m.reference)) !== undefined);
  const messagesTo = (phone: string) => ({
    sigma: smsc.submits.filter((s) => s.destination_addr === phone.slice(1)).length,
    alpha: alpha.to(phone).length,
    beta: beta.to(phone).length,
  });

  it("re-sends the code of an SMPP message reported UNDELIV through the next provider, once, net one price", async () => {
    const before = await balance();
    const phone = viaSigma();
    const auth = await sendV1(phone);
    const index = smsc.submits.findIndex((s) => s.destination_addr === phone.slice(1));
    const code = /\b(\d{6})\b/.exec(messageText(smsc.submits[index]?.short_message))?.[1];
    expect(code).to.be.a("string");
    expect(before - (await balance())).to.equal(PRICE);

    // The SMSC answered submit n with msg-n.
    await receipt(phone, `msg-${index + 1}`, "UNDELIV");
    const resent = await alpha.received(phone);
    expect(SmsReceiver.code(resent), "the same code").to.equal(code);
    // The undelivered message refunded, the re-send charged: one price in all.
    await waitFor(async () => before - (await balance()) === PRICE);
    await remembered("alpha", resent);
    expect(messagesTo(phone)).to.deep.equal({ sigma: 1, alpha: 1, beta: 0 });

    // The same receipt again changes nothing. (A receipt of another message after it, once
    // recorded, says the repeat has been read too.)
    await receipt(phone, `msg-${index + 1}`, "UNDELIV");
    const other = viaSigma();
    const otherAuth = await sendV1(other);
    const otherIndex = smsc.submits.findIndex((s) => s.destination_addr === other.slice(1));
    await receipt(other, `msg-${otherIndex + 1}`, "DELIVRD");
    await waitFor(async () => (await deliveryStatuses(otherAuth)).length === 1);
    expect(messagesTo(phone)).to.deep.equal({ sigma: 1, alpha: 1, beta: 0 });
    expect(before - (await balance())).to.equal(PRICE * 2); // this message's price, and the other's
    expect(await deliveryStatuses(auth)).to.have.length(1);

    // The re-sent message reported undelivered: refunded, and not re-sent again.
    await report("alpha", resent.reference, "undelivered");
    expect(before - (await balance()), "both messages refunded").to.equal(PRICE);
    expect(messagesTo(phone)).to.deep.equal({ sigma: 1, alpha: 1, beta: 0 });
    await report("alpha", resent.reference, "undelivered");
    expect(before - (await balance()), "a repeated report refunds nothing more").to.equal(PRICE);

    // The code still checks right.
    expect((await check(auth, code ?? "")).body.status).to.equal("valid");
  });

  for (const status of ["undelivered", "rejected"] as const) {
    it(`re-sends the code of an http message reported ${status} through the next provider, net one price`, async () => {
      const before = await balance();
      const phone = viaAlpha();
      const auth = await sendV1(phone);
      const [first] = alpha.to(phone);
      if (first === undefined) throw new Error("alpha got no message");

      await report("alpha", first.reference, status);
      const [resent] = beta.to(phone);
      if (resent === undefined) throw new Error("beta got no re-send");
      expect(SmsReceiver.code(resent), "the same code").to.equal(SmsReceiver.code(first));
      expect(resent.reference).to.not.equal(first.reference);
      expect(before - (await balance()), "refunded, and the re-send charged").to.equal(PRICE);

      // The same report again: nothing.
      await report("alpha", first.reference, status);
      expect(messagesTo(phone)).to.deep.equal({ sigma: 0, alpha: 1, beta: 1 });
      expect(before - (await balance())).to.equal(PRICE);

      // The re-sent one reported too: refunded, never re-sent a second time.
      await remembered("beta", resent);
      await report("beta", resent.reference, status);
      expect(before - (await balance())).to.equal(0);
      expect(messagesTo(phone)).to.deep.equal({ sigma: 0, alpha: 1, beta: 1 });
      expect((await check(auth, SmsReceiver.code(resent))).body.status).to.equal("valid");
    });
  }

  it("re-sends once and refunds once when the same report comes many times at once", async () => {
    const before = await balance();
    const phone = viaAlpha();
    await sendV1(phone);
    const [first] = alpha.to(phone);
    if (first === undefined) throw new Error("alpha got no message");
    await Promise.all(Array.from({ length: 8 }, () => report("alpha", first.reference, "undelivered")));
    expect(messagesTo(phone)).to.deep.equal({ sigma: 0, alpha: 1, beta: 1 });
    expect(before - (await balance())).to.equal(PRICE);
  });

  it("refunds an undelivered message and charges nothing more when no other provider takes the re-send", async () => {
    const before = await balance();
    const phone = viaAlpha();
    await sendV1(phone);
    const [first] = alpha.to(phone);
    if (first === undefined) throw new Error("alpha got no message");
    beta.answer = () => 503;
    try {
      await report("alpha", first.reference, "undelivered");
    } finally {
      beta.answer = () => 200;
    }
    expect(messagesTo(phone), "beta was tried").to.deep.equal({ sigma: 0, alpha: 1, beta: 1 });
    expect(beta.accepted.filter((m) => m.to === phone)).to.deep.equal([]);
    expect(before - (await balance()), "nothing paid for a message never delivered").to.equal(0);
  });

  it("re-sends a V2 verification's code the same way", async () => {
    const before = await balance();
    const phone = viaAlpha();
    const created = await rest(app.baseUrl).call("POST", "/v2/verification", {
      body: { target: { type: "phone_number", value: phone } },
      bearer: customer.key,
    });
    expect(created.body.status, created.text).to.equal("success");
    expect(authUuidOfVerification(String(created.body.id))).to.be.a("string");
    const [first] = alpha.to(phone);
    if (first === undefined) throw new Error("alpha got no message");
    await report("alpha", first.reference, "undelivered");
    expect(beta.to(phone).map((m) => SmsReceiver.code(m))).to.deep.equal([SmsReceiver.code(first)]);
    expect(before - (await balance())).to.equal(PRICE);
  });

  it("refunds a message reported undelivered after its code was checked right, and re-sends nothing", async () => {
    const before = await balance();
    const phone = viaAlpha();
    const auth = await sendV1(phone);
    const [first] = alpha.to(phone);
    if (first === undefined) throw new Error("alpha got no message");
    expect((await check(auth, SmsReceiver.code(first))).body.status).to.equal("valid");

    await report("alpha", first.reference, "undelivered");
    expect(before - (await balance()), "refunded").to.equal(0);
    expect(messagesTo(phone)).to.deep.equal({ sigma: 0, alpha: 1, beta: 0 });
  });

  it("refunds a message whose code a retry replaced, and does not re-send the old code", async () => {
    const before = await balance();
    const phone = viaAlpha();
    const auth = await sendV1(phone);
    const retried = await rest(app.baseUrl).post(
      "/v1/retry",
      { customer_uuid: customer.uuid, authentication_uuid: auth },
      { "x-api-key": customer.key },
    );
    expect(retried.body.status, retried.text).to.equal("approved");
    // The retry went to beta, the other provider of the route.
    expect(messagesTo(phone)).to.deep.equal({ sigma: 0, alpha: 1, beta: 1 });
    const [first] = alpha.to(phone);
    if (first === undefined) throw new Error("alpha got no message");

    await report("alpha", first.reference, "undelivered");
    expect(before - (await balance()), "the first refunded, the retry charged").to.equal(PRICE);
    expect(messagesTo(phone)).to.deep.equal({ sigma: 0, alpha: 1, beta: 1 });
  });
});
