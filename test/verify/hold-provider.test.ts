import { expect } from "chai";
import { startTestApp, type TestApp } from "../support/app.js";
import { fundedAccount, postSend } from "../support/v1.js";
import { SmsPeer } from "../support/sms-peer.js";
import { rest } from "../support/rest.js";
import { routedRecovery } from "../support/routed-recovery.js";
import { waitFor } from "../support/redis.js";

const ALPHA_TOKEN = "alpha-status-token-0123456789abcdef";

/**
 * Hold recovery re-sends a held message through the provider its hold names, with the same
 * reference, never through another (docs/routing.md#hold-recovery). The service declares beta then
 * alpha (no route: failover in that order); beta refuses the message, the hold moves to alpha, and
 * the service stops answering while alpha has it (its call hangs, as a service that died mid-call):
 * the recovery, from a clock past the hold's deadline, finds the hold naming alpha. (A submit that
 * times out while the service lives is given up, the hold released: docs/routing.md#availability.)
 */
describe("hold recovery and the provider a hold names", () => {
  let app: TestApp;
  let alpha: SmsPeer;
  let beta: SmsPeer;
  let entries: { name: string; url: string; timeout_ms: number; status_token?: string }[];
  let customer: { uuid: string; apiKey: string };
  let nextNumber = 612_800_000;

  before(async function () {
    this.timeout(30_000);
    alpha = await SmsPeer.start();
    beta = await SmsPeer.start();
    entries = [
      { name: "beta", url: beta.url, timeout_ms: 300 },
      { name: "alpha", url: alpha.url, timeout_ms: 2_000, status_token: ALPHA_TOKEN },
    ];
    app = await startTestApp({
      DELIVERY_PROVIDERS: JSON.stringify(entries),
      // Only the recoveries these tests make run, when they say; the refusals open no circuit.
      SMS_HOLD_RECOVERY_INTERVAL_MS: "0",
      PROVIDER_CIRCUIT_FAILURES: "1000",
    });
  });
  beforeEach(async () => {
    const { account, apiKey } = await fundedAccount(app.registry.accounts, "Hold provider");
    customer = { uuid: account.customerUuid, apiKey };
  });
  afterEach(async () => {
    // The owner's call ends once alpha's timeout passes: nothing it does changes a resolved hold.
    await hanging;
  });
  after(async () => {
    await app.stop();
    await Promise.all([alpha.close(), beta.close()]);
  });

  /** A recovery as a service whose DELIVERY_PROVIDERS are `declared` runs it, every hold past its deadline. */
  const recoveryWith = (declared: typeof entries) => routedRecovery(app, declared, 60_000);

  const balance = async () => (await app.registry.accounts.get(customer.uuid))?.balanceMicros;
  const holdsKey = () => app.registry.verify.holdsKey(customer.uuid);

  /** The call of the send `heldAtAlpha` left hanging; the test awaits its answer once recovered. */
  let hanging: Promise<unknown> = Promise.resolve();

  /**
   * A send refused by beta and hanging at alpha, its hold naming alpha, charged: the state a service
   * that died while alpha had its message leaves behind. Its own call, answered once alpha's
   * timeout passes, gives nothing back any more once the recovery resolved the hold.
   */
  async function heldAtAlpha(): Promise<{ auth: string; reference: string; price: number }> {
    beta.answer = () => 400;
    alpha.answer = () => "hang";
    const before = (await balance()) ?? 0;
    hanging = postSend(app.baseUrl, customer.apiKey, {
      customer_uuid: customer.uuid,
      phone_number: `+33${String((nextNumber += 1000))}`,
    });
    await waitFor(
      async () => (await app.registry.redis.zcard(holdsKey())) === 1 && alpha.messages.length > 0,
    );
    await waitFor(async () => {
      const [held = ""] = await app.registry.redis.zrange(holdsKey(), "0", "-1");
      return alpha.count(held) === 1;
    });
    const [reference = ""] = await app.registry.redis.zrange(holdsKey(), "0", "-1");
    const hold = await app.registry.redis.hgetall(app.registry.verify.holdKey(customer.uuid, reference));
    expect(hold.provider).to.equal("alpha");
    expect([beta.count(reference), alpha.count(reference)]).to.deep.equal([1, 1]);
    const auth = reference.split(".")[0] ?? "";
    expect(reference).to.equal(`${auth}.1`);
    return { auth, reference, price: before - ((await balance()) ?? 0) };
  }

  it("re-sends a held message through the provider its hold names, with the same reference, never through another", async () => {
    const { auth, reference, price } = await heldAtAlpha();
    expect(price).to.be.greaterThan(0);
    // Both answer now: beta, first in declared order and the route's first, would take it.
    alpha.answer = () => 200;
    beta.answer = () => 200;
    const charged = await balance();
    expect(await recoveryWith(entries).sweep()).to.equal(1);
    expect([alpha.count(reference), beta.count(reference)]).to.deep.equal([2, 1]);
    expect(alpha.messages.at(-1)?.reference).to.equal(reference);
    // The charge stands, once; the hold is gone; the code is the one to check.
    expect(await balance()).to.equal(charged);
    expect(await app.registry.redis.zcard(holdsKey())).to.equal(0);
    expect(await app.registry.verify.get(customer.uuid, auth)).not.to.equal(undefined);
    // alpha's delivery reports will name the message: it is remembered as alpha's.
    expect(await app.registry.verify.messageOwner("alpha", reference)).to.deep.include({
      customer: customer.uuid,
      auth,
      attempt: 1,
    });
    expect(await app.registry.verify.messageOwner("beta", reference)).to.equal(undefined);
    // Nothing left: a second pass sends nothing.
    await recoveryWith(entries).sweep();
    expect([alpha.count(reference), beta.count(reference)]).to.deep.equal([2, 1]);
  });

  it("refunds a held message whose provider is no longer configured, sending it through no other", async () => {
    const { auth, reference, price } = await heldAtAlpha();
    alpha.answer = () => 200;
    beta.answer = () => 200;
    const charged = (await balance()) ?? 0;
    // The service started again with alpha gone from DELIVERY_PROVIDERS: beta alone is left.
    const betaOnly = entries.filter((e) => e.name === "beta");
    expect(await recoveryWith(betaOnly).sweep()).to.equal(1);
    expect([alpha.count(reference), beta.count(reference)]).to.deep.equal([1, 1]);
    expect(await balance()).to.equal(charged + price);
    expect(await app.registry.redis.zcard(holdsKey())).to.equal(0);
    // Nothing was sent that the user could enter: the send is given back whole.
    expect(await app.registry.verify.get(customer.uuid, auth)).to.equal(undefined);
  });

  // BUG: a message the hold recovery re-sent and committed cannot be re-sent once reported
  // undelivered: only src/verify/delivery.ts deliver() keeps the sealed message for a re-send
  // (keepForResend, store.keepForResend), and src/verify/holds.ts HoldRecovery.recover() does not,
  // so undelivered.lua finds no `sm` and only refunds. docs/routing.md#undelivered: a report while
  // the code lives re-sends that attempt's code once through the next provider. Fix: keep the
  // sealed message in recover() after a commit as deliver() does (or in resolve-hold.lua's commit).
  it("re-sends through another provider the code of a recovered message reported undelivered", async () => {
    const { reference, price } = await heldAtAlpha();
    alpha.answer = () => 200;
    beta.answer = () => 200;
    const charged = (await balance()) ?? 0;
    expect(await recoveryWith(entries).sweep()).to.equal(1);
    const res = await rest(app.baseUrl).call("POST", "/v1/delivery/status/alpha", {
      body: { reference, status: "undelivered" },
      bearer: ALPHA_TOKEN,
    });
    expect(res.status, res.text).to.equal(204);
    expect(beta.count(`${reference}r`), "the code re-sent through beta").to.equal(1);
    // Refunded, and the re-send charged: one price in all.
    expect(await balance()).to.equal(charged);
    expect(price).to.be.greaterThan(0);
  });
});
