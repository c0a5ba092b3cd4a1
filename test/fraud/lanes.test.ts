import { expect } from "chai";
import { RingfenceError } from "../../src/errors.js";
import { AccountLanes } from "../../src/fraud/lanes.js";
import { waitFor } from "../support/redis.js";

/** A call that runs until `open()` is called, and records when it started. */
function gate(log: string[], name: string) {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return {
    work: async () => {
      log.push(`start ${name}`);
      await opened;
      log.push(`end ${name}`);
      return name;
    },
    open: () => {
      open();
    },
  };
}

/** docs/fraud.md#pages: an account's report calls one at a time, a bounded number waiting. */
describe("fraud reports: one account's calls in one lane", () => {
  it("runs an account's calls one after the other, in order, while another account's run at once", async () => {
    const lanes = new AccountLanes(8, "REPORTS_LIMIT_ACCOUNT");
    const log: string[] = [];
    const [a1, a2, a3, b1] = ["a1", "a2", "a3", "b1"].map((n) => gate(log, n)) as [
      ReturnType<typeof gate>,
      ReturnType<typeof gate>,
      ReturnType<typeof gate>,
      ReturnType<typeof gate>,
    ];
    const answers = [lanes.run("A", a1.work), lanes.run("A", a2.work), lanes.run("A", a3.work)];
    const other = lanes.run("B", b1.work);
    await waitFor(() => Promise.resolve(log.includes("start a1") && log.includes("start b1")));
    expect(log).to.not.include("start a2");
    b1.open();
    expect(await other).to.equal("b1");
    a1.open();
    // The second waits for the first to end (and the pause after it), then the third for it.
    await waitFor(() => Promise.resolve(log.includes("start a2")));
    expect(log).to.not.include("start a3");
    a2.open();
    await waitFor(() => Promise.resolve(log.includes("start a3")));
    a3.open();
    expect(await Promise.all(answers)).to.deep.equal(["a1", "a2", "a3"]);
    const a = log.filter((l) => l.endsWith("a1") || l.endsWith("a2") || l.endsWith("a3"));
    expect(a).to.deep.equal(["start a1", "end a1", "start a2", "end a2", "start a3", "end a3"]);
  });

  it("refuses one call more than the lane holds with 429 naming the rule, and takes calls again once one ends", async () => {
    const lanes = new AccountLanes(2, "REPORTS_LIMIT_ACCOUNT");
    const log: string[] = [];
    const g1 = gate(log, "1");
    const g2 = gate(log, "2");
    const held = [lanes.run("A", g1.work), lanes.run("A", g2.work)];
    const refused = await lanes
      .run("A", () => Promise.resolve("3"))
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(refused).to.be.instanceOf(RingfenceError);
    const e = refused as RingfenceError;
    expect(e.code).to.equal("too_many_attempts");
    expect(e.refusedBy).to.equal("REPORTS_LIMIT_ACCOUNT");
    expect(e.headers["retry-after"]).to.equal("1");
    expect(log).to.not.include("start 3");
    g1.open();
    g2.open();
    expect(await Promise.all(held)).to.deep.equal(["1", "2"]);
    // A failed call frees its place as well.
    await lanes.run("A", () => Promise.reject(new Error("boom"))).catch(() => undefined);
    expect(await lanes.run("A", () => Promise.resolve("4"))).to.equal("4");
  });
});
