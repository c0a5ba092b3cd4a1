import { expect } from "chai";
import { Circuit } from "../../src/delivery/circuit.js";
import { orderProviders, type StrategyInputs } from "../../src/delivery/strategy.js";
import type { ProviderSpec } from "../../src/messaging/providers.js";
import { seeded } from "../support/seeded.js";

const spec = (name: string, cost: Record<string, number>): ProviderSpec => ({
  name,
  channel: "sms",
  kind: "http",
  url: `http://127.0.0.1:9/${name}`,
  cost,
  timeoutMs: 1000,
});

const specs = new Map([
  ["a", spec("a", { default: 0.05, FR: 0.02 })],
  ["b", spec("b", { default: 0.03 })],
  ["c", spec("c", {})],
]);

const inputs = (over: Partial<StrategyInputs> = {}): StrategyInputs => ({
  country: "FR",
  specs,
  figures: undefined,
  minSends: 20,
  exploreShare: 0.1,
  random: seeded(7),
  ...over,
});

describe("route strategies (decisions 9.2, Strategies)", () => {
  it("failover: the declared order", () => {
    expect(orderProviders({ providers: ["b", "a", "c"], strategy: "failover" }, inputs())).to.deep.equal([
      "b",
      "a",
      "c",
    ]);
  });

  it("weighted: the first choice follows the weights within a few points, and the rest follow", () => {
    const s = inputs({ random: seeded(42) });
    const first = { a: 0, b: 0, c: 0 } as Record<string, number>;
    for (let i = 0; i < 2_000; i++) {
      const order = orderProviders(
        { providers: ["a", "b", "c"], strategy: "weighted", weights: [70, 30, 0] },
        s,
      );
      expect([...order].sort()).to.deep.equal(["a", "b", "c"]);
      first[order[0] as string] = (first[order[0] as string] ?? 0) + 1;
      // A weight of 0 is tried last.
      expect(order[2]).to.equal("c");
    }
    expect(first.a! / 2_000).to.be.closeTo(0.7, 0.03);
    expect(first.c).to.equal(0);
  });

  it("cost: the cheapest for the country, else its default, a provider with no cost last", () => {
    expect(orderProviders({ providers: ["c", "b", "a"], strategy: "cost" }, inputs())).to.deep.equal([
      "a",
      "b",
      "c",
    ]);
    expect(
      orderProviders({ providers: ["c", "b", "a"], strategy: "cost" }, inputs({ country: "DE" })),
    ).to.deep.equal(["b", "a", "c"]);
  });

  it("conversion: the best measured first, one under ROUTE_MIN_SENDS counts as best, the explore share on the others", () => {
    const figures = new Map([
      ["a", { sent: 100, accepted: 100, verified: 40 }],
      ["b", { sent: 100, accepted: 100, verified: 80 }],
      ["c", { sent: 5, accepted: 5, verified: 0 }],
    ]);
    const ranked = orderProviders(
      { providers: ["a", "b", "c"], strategy: "conversion" },
      inputs({ figures, exploreShare: 0 }),
    );
    expect(ranked).to.deep.equal(["c", "b", "a"]);
    const measured = new Map([...figures, ["c", { sent: 100, accepted: 90, verified: 9 }]]);
    const s = inputs({ figures: measured, random: seeded(3) });
    let others = 0;
    const n = 3_000;
    for (let i = 0; i < n; i++) {
      const order = orderProviders({ providers: ["a", "b", "c"], strategy: "conversion" }, s);
      if (order[0] !== "b") others++;
      else expect(order).to.deep.equal(["b", "a", "c"]);
    }
    expect(others / n).to.be.closeTo(0.1, 0.02);
  });
});

describe("a provider's circuit (decisions 9.2, Availability)", () => {
  let now = 0;
  const changes: boolean[] = [];
  const circuit = () =>
    new Circuit({ failures: 3, openMs: 30_000, now: () => now }, (open) => changes.push(open));

  beforeEach(() => {
    now = 1_000;
    changes.length = 0;
  });

  it("opens after PROVIDER_CIRCUIT_FAILURES failures in a row, not after failures a success interrupts", () => {
    const c = circuit();
    c.failed();
    c.failed();
    c.succeeded();
    c.failed();
    c.failed();
    expect(c.take()).to.equal(true);
    c.failed();
    expect(c.isOpen()).to.equal(true);
    expect(c.take()).to.equal(false);
    expect(changes).to.deep.equal([true]);
  });

  it("lets one probe through after PROVIDER_CIRCUIT_OPEN_SECONDS; a failed probe opens it again, an accepted one closes it", () => {
    const c = circuit();
    for (let i = 0; i < 3; i++) c.failed();
    now += 30_000;
    expect(c.isAvailable()).to.equal(true);
    expect(c.take()).to.equal(true);
    // One probe at a time.
    expect(c.take()).to.equal(false);
    c.failed();
    expect(c.take()).to.equal(false);
    now += 30_000;
    expect(c.take()).to.equal(true);
    c.succeeded();
    expect(c.isOpen()).to.equal(false);
    expect(c.take()).to.equal(true);
    expect(changes).to.deep.equal([true, false]);
  });
});
