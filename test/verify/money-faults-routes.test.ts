import { expect } from "chai";
import {
  faultRig,
  holdsLeft,
  sendThroughFaults,
  START_BALANCE,
  type Provider,
} from "../support/money-faults.js";
import { rest } from "../support/rest.js";

const ALPHA_TOKEN = "alpha-status-token-0123456789abcdef";
const BETA_TOKEN = "beta-status-token-0123456789abcdef";

/** The references both providers accepted: a message charged once and sent twice. */
const acceptedByBoth = (a: Provider, b: Provider) => [...a.accepted].filter((r) => b.accepted.has(r));

/** A re-send after an undelivered report carries its message's reference with `r` added (src/verify/undelivered.ts). */
const isResend = (reference: string) => reference.endsWith("r");

/**
 * The billing invariant over two providers (docs/routing.md#availability): the service routes every
 * message through alpha then beta (DELIVERY_PROVIDERS, no route), alpha refusing about three in ten
 * references (400 for good, 503 once) so that beta takes them within the call, beta refusing about
 * two in ten (then nothing is charged). Both treat `reference` as an idempotency key.
 */
describe("V1 send billing over two providers under Redis faults and crashes", function () {
  this.timeout(180_000);
  const startRig = faultRig("Routes", {
    refusals: [
      { lasting: 38, passing: 38, salt: "alpha" },
      { lasting: 26, passing: 26, salt: "beta" },
    ],
    delivery: ([alpha, beta]) => ({
      DELIVERY_PROVIDERS: JSON.stringify([
        { name: "alpha", url: alpha?.url, timeout_ms: 2000, status_token: ALPHA_TOKEN },
        { name: "beta", url: beta?.url, timeout_ms: 2000, status_token: BETA_TOKEN },
      ]),
    }),
  });

  it("charges each reference accepted by either provider and not reported undelivered, and sends no held message through both", async () => {
    const rig = await startRig();
    const { data, customer, price } = rig;
    const [alpha, beta] = rig.providers;
    if (alpha === undefined || beta === undefined) throw new Error("two providers");
    const { bad, ok, baseUrl } = await sendThroughFaults(
      rig,
      (w, n) => `+3363${String(w)}${String(n % 1_000_000).padStart(6, "0")}`,
    );
    expect(bad).to.deep.equal([]);
    expect(ok).to.be.greaterThan(10);
    // Failover happened: beta carried messages alpha had refused (beta refuses some too, when
    // nothing is charged; with some forty sends that is likely, not certain, so not asserted).
    expect([...beta.accepted].filter((r) => alpha.seen.has(r))).not.to.be.empty;
    // A hold names one provider; its recovery asks that one again, never the other.
    expect(acceptedByBoth(alpha, beta)).to.deep.equal([]);

    // beta reports one message in three it accepted undelivered: each is refunded, and its code
    // re-sent once through alpha (the route's other provider), charged again once alpha accepts.
    const report = (provider: string, token: string, reference: string, status: string) =>
      rest(baseUrl).call("POST", `/v1/delivery/status/${provider}`, {
        body: { reference, status },
        bearer: token,
        signal: AbortSignal.timeout(10_000),
      });
    const undelivered = [...beta.accepted].filter((_, i) => i % 3 === 0);
    expect(undelivered).not.to.be.empty;
    for (const reference of undelivered) {
      const res = await report("beta", BETA_TOKEN, reference, "undelivered");
      expect([res.status, res.text], reference).to.deep.equal([204, ""]);
    }
    // A repeated report changes nothing.
    const again = await report("beta", BETA_TOKEN, undelivered[0] ?? "", "undelivered");
    expect(again.status).to.equal(204);
    const resent = [...alpha.seen].filter(isResend);
    expect(resent).not.to.be.empty;
    expect(
      resent.every((r) => undelivered.includes(r.slice(0, -1))),
      resent.join(" "),
    ).to.equal(true);
    expect([...beta.seen].filter(isResend)).to.deep.equal([]);
    // alpha reports some of the re-sends it accepted rejected: a re-sent message is refunded too.
    const rejected = [...alpha.accepted].filter(isResend).slice(0, 3);
    for (const reference of rejected) {
      const res = await report("alpha", ALPHA_TOKEN, reference, "rejected");
      expect(res.status, reference).to.equal(204);
    }

    expect(acceptedByBoth(alpha, beta)).to.deep.equal([]);
    const charged = new Set([...alpha.accepted, ...beta.accepted]);
    for (const reference of [...undelivered, ...rejected]) charged.delete(reference);
    const balance = (await data.accounts.get(customer))?.balanceMicros;
    expect(balance).to.equal(START_BALANCE - charged.size * price);
    expect(await holdsLeft(data)).to.equal(0);
  });
});
