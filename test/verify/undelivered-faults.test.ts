import { expect } from "chai";
import { startTestApp, type TestApp } from "../support/app.js";
import { FailingRedis } from "../support/failing-redis.js";
import { testRedisUrl } from "../support/hooks.js";
import { waitFor } from "../support/redis.js";
import { rest } from "../support/rest.js";
import { SmsPeer } from "../support/sms-peer.js";
import { fundedAccount, postSend } from "../support/v1.js";

const ALPHA_TOKEN = "alpha-status-token-0123456789abcdef";
const BETA_TOKEN = "beta-status-token-0123456789abcdef";

/**
 * The money of undelivered messages when Redis fails one command at the wrong moment (a restart:
 * it answers LOADING): the customer pays for the messages accepted and not reported undelivered
 * (docs/routing.md#undelivered), whatever fails once and is tried again. The service sends through
 * alpha, then beta; both send delivery reports; its Redis is reached through a FailingRedis.
 */
describe("undelivered reports when Redis fails one command", () => {
  let app: TestApp;
  let proxy: FailingRedis;
  let alpha: SmsPeer;
  let beta: SmsPeer;
  let customer: { uuid: string; apiKey: string };
  let nextNumber = 612_900_000;

  before(async function () {
    this.timeout(30_000);
    alpha = await SmsPeer.start();
    beta = await SmsPeer.start();
    const { hostname, port } = new URL(testRedisUrl());
    proxy = await FailingRedis.start({ host: hostname, port: Number(port) });
    app = await startTestApp({
      REDIS_URL: proxy.url,
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha.url, status_token: ALPHA_TOKEN },
        { name: "beta", url: beta.url, status_token: BETA_TOKEN },
      ]),
      SMS_HOLD_RECOVERY_INTERVAL_MS: "0",
    });
  });
  beforeEach(async () => {
    proxy.failed.splice(0);
    alpha.answer = () => 200;
    beta.answer = () => 200;
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Undelivered faults");
    customer = { uuid: account.customerUuid, apiKey };
  });
  after(async () => {
    await app.stop();
    await proxy.close();
    await Promise.all([alpha.close(), beta.close()]);
  });

  const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros ?? Number.NaN;
  /** A V1 send alpha accepted: its reference and what it cost. */
  const sent = async () => {
    const start = await balance();
    const phone = `+33${String((nextNumber += 1000))}`;
    const r = await postSend(app.baseUrl, customer.apiKey, {
      customer_uuid: customer.uuid,
      phone_number: phone,
    });
    expect(r.status, r.text).to.equal(200);
    const reference = `${String(r.body.authentication_uuid)}.1`;
    expect(alpha.count(reference)).to.equal(1);
    return { reference, price: start - (await balance()) };
  };
  const report = (provider: "alpha" | "beta", reference: string, status = "undelivered") =>
    rest(app.baseUrl).call("POST", `/v1/delivery/status/${provider}`, {
      body: { reference, status },
      bearer: provider === "alpha" ? ALPHA_TOKEN : BETA_TOKEN,
    });
  /** A command that names `key` (a script's key, a SET's). */
  const naming = (key: string) => (command: string) => command.includes(key);
  /** The customer's spend of the month: written by the refund of a report and by the charge of a re-send. */
  const spend = () => naming(`acct:{${customer.uuid}}:spend:`);

  it("refunds a message reported undelivered and charges its re-send through beta: one price in all", async () => {
    const { reference, price } = await sent();
    const res = await report("alpha", reference);
    expect(res.status, res.text).to.equal(204);
    expect(beta.count(`${reference}r`)).to.equal(1);
    expect(await balance()).to.equal(10_000_000 - price);
  });

  it("refunds a message reported undelivered whose re-send nobody takes: nothing charged", async () => {
    const { reference } = await sent();
    beta.answer = () => 400;
    const res = await report("alpha", reference);
    expect(res.status, res.text).to.equal(204);
    expect(beta.count(`${reference}r`)).to.equal(1);
    expect(await balance()).to.equal(10_000_000);
  });

  // BUG: src/verify/engine.ts recordReceipt() notes the report (store.reportOnce, report-once.lua)
  // in one round trip and refunds it later in another (afterUndelivered -> undelivered.lua). When
  // the refund fails (Redis restarting), the report is answered 5xx; the provider sends it again,
  // reportOnce finds the state already noted, and recordReceipt returns before the refund: the
  // message stays charged for ever. Fix: note the state and refund in one script (undelivered.lua
  // setting the `k<attempt>` field itself), or note the state only after the refund is done.
  it("refunds a message whose undelivered report failed once and came again", async () => {
    const { reference } = await sent();
    beta.answer = () => 400;
    proxy.failNext(spend());
    const failed = await report("alpha", reference);
    expect(proxy.failed, "the refund failed").to.have.length(1);
    expect(failed.status, failed.text).to.be.at.least(500);
    const again = await report("alpha", reference);
    expect(again.status, again.text).to.equal(204);
    expect(await balance(), "refunded").to.equal(10_000_000);
    expect(beta.count(`${reference}r`), "the code re-sent").to.equal(1);
  });

  // BUG: src/verify/undelivered.ts afterUndelivered() sends the re-send without a hold, then charges
  // it (store.chargeResend) inside the try of the send: when Redis fails that charge once, the catch
  // takes it for a refusal by the provider (router.submitted(p, plan, false) after the `true` already
  // counted, a failure against beta's circuit, then the next provider tried, which may send the code
  // once more), and the message beta accepted is never charged. Fix: charge the re-send as sends are
  // charged (a hold made by undelivered.lua, committed or released by the provider's answer, left to
  // the hold recovery when Redis does not answer), and keep Redis failures apart from the provider's.
  it("charges a re-send beta accepted when Redis fails its charge once", async () => {
    const { reference, price } = await sent();
    // The first write of the spend is the refund, the second the re-send's charge.
    proxy.failNext(spend(), 1);
    const res = await report("alpha", reference);
    expect(proxy.failed, "the charge failed").to.have.length(1);
    expect(beta.count(`${reference}r`)).to.equal(1);
    expect(res.status, res.text).to.equal(204);
    // Retried or left to a recovery, the charge lands: refunded once, the re-send charged once.
    const due = 10_000_000 - price;
    await waitFor(async () => (await balance()) === due, 10_000).catch(() => undefined);
    expect(await balance()).to.equal(due);
  });

  // BUG: src/verify/delivery.ts deliver() remembers the message id for reports (store.rememberMessage)
  // once, its failure only logged, while the hold's commit beside it is retried (settleHold): when
  // Redis fails that SET, a later undelivered report finds no message (answered 204, ignored) and the
  // undelivered message stays charged. The hold recovery's re-send (src/verify/holds.ts recover())
  // does the same. Fix: record the message id in the commit itself (resolve-hold.lua, as it keeps
  // the sealed message), or retry it with the commit.
  it("refunds a message reported undelivered whose id Redis failed to remember at the send", async () => {
    proxy.failNext(naming("smsref:{"));
    const { reference } = await sent();
    expect(proxy.failed, "the id's SET failed").to.have.length(1);
    // The report comes later than the send: a retried SET would have landed.
    const known = async () => (await app.registry.verify.messageOwner("alpha", reference)) !== undefined;
    await waitFor(known, 5_000).catch(() => undefined);
    beta.answer = () => 400;
    const res = await report("alpha", reference);
    expect(res.status, res.text).to.equal(204);
    expect(await balance(), "refunded").to.equal(10_000_000);
    expect(beta.count(`${reference}r`), "the code re-sent").to.equal(1);
  });
});
