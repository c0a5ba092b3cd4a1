import { expect } from "chai";
import {
  defaultSettings,
  scenario,
  simulateAll,
  STRATEGIES,
  type Outcome,
  type SimStrategy,
} from "../../bench/routing-sim.js";
import { testRedisUrl } from "../support/hooks.js";

/**
 * The claims of docs/routing.md#measured, on a short run of the same simulation (two simulated
 * hours: B loses 40% of FR from 0:20, A is down from 1:00 to 1:20), through the real Router and
 * the test Redis. The run is seeded, so these figures are the same on every machine.
 */
describe("routing simulation (npm run routing:sim, two simulated hours)", () => {
  const by = {} as Record<SimStrategy, Outcome>;
  const conversion = (o: Outcome) => o.verified / o.users;
  const explore = defaultSettings().ROUTE_EXPLORE_SHARE;

  before(async function () {
    this.timeout(240_000);
    for (const o of await simulateAll(testRedisUrl(), scenario(2))) by[o.strategy] = o;
  });

  it("converts more users with the conversion strategy than with failover or cost", () => {
    expect(conversion(by.conversion)).to.be.greaterThan(conversion(by.failover));
    expect(conversion(by.conversion)).to.be.greaterThan(conversion(by.cost));
  });

  it("moves FR off B within minutes of its loss, and keeps exploring B and C", () => {
    expect(by.conversion.offB.before, "B carried FR before its loss").to.be.greaterThan(0.5);
    expect(by.conversion.offB.minutes).to.be.a("number").and.at.most(15);
    expect(by.conversion.frShares.b).to.be.at.most(0.1);
    expect(by.conversion.frShares.a).to.be.greaterThan(0.8);
    // Each of the two others is explored with probability explore/2 per code: a sampled share,
    // hence the 20% allowance below it.
    for (const other of ["b", "c"] as const) {
      expect(by.conversion.frShares[other], other).to.be.at.least(0.8 * (explore / 2));
    }
  });

  it("stays within 1.5 points of the oracle's conversion with every strategy", () => {
    for (const s of STRATEGIES) {
      expect(conversion(by.oracle) - conversion(by[s]), s).to.be.within(0, 0.015);
    }
  });

  it("loses no code to A's outage: each refusal or timeout goes on to another provider within the call", () => {
    for (const s of STRATEGIES) expect(by[s].outage.lost, s).to.equal(0);
    // The circuit skips A after 5 failures in a row, then probes it every 30 s: a handful per outage.
    for (const s of STRATEGIES.filter((x) => x !== "oracle")) {
      expect(by[s].outage.failedOver, s).to.be.within(5, 60);
    }
    expect(by.oracle.outage.failedOver).to.equal(0);
  });

  it("goes back to A within 2 minutes of the outage's end (the circuit's 30 s probe)", () => {
    for (const s of ["failover", "weighted", "conversion"] as const) {
      expect(by[s].backToA.minutes, s).to.be.a("number").and.at.most(2);
    }
  });

  it("leaves the cost strategy on B for FR whatever B loses, and asks more users for a second code", () => {
    expect(by.cost.frShares.b).to.equal(1);
    expect(by.cost.offB.minutes).to.equal(undefined);
    expect(by.cost.retried / by.cost.users).to.be.greaterThan(
      (2 * by.conversion.retried) / by.conversion.users,
    );
  });
});
