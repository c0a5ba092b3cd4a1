import { expect } from "chai";
import {
  faultRig,
  holdsLeft,
  sendLoops,
  sendThroughFaults,
  sleep,
  START_BALANCE,
} from "../support/money-faults.js";
import { waitFor } from "../support/redis.js";

describe("V1 send billing under Redis faults and crashes", function () {
  this.timeout(180_000);
  const startRig = faultRig("Faults");

  it("charges exactly the messages the provider accepted, with no hold left, across a pause, a restart and a SIGKILL", async () => {
    const rig = await startRig();
    const { data, customer, price } = rig;
    const [sms] = rig.providers;
    if (sms === undefined) throw new Error("no provider");
    const { bad, ok } = await sendThroughFaults(
      rig,
      (w, n) => `+3361${String(w)}${String(n % 1_000_000).padStart(6, "0")}`,
    );

    expect(bad).to.deep.equal([]);
    expect(ok).to.be.greaterThan(10);
    expect(sms.refusals).to.be.greaterThan(0);
    const balance = (await data.accounts.get(customer))?.balanceMicros;
    expect(balance).to.equal(START_BALANCE - sms.accepted.size * price);
    expect(await holdsLeft(data)).to.equal(0);
  });
});

describe("V1 send billing across repeated Redis pauses and AOF restarts", function () {
  this.timeout(180_000);
  const startRig = faultRig("Pauses");

  it("never charges more than the provider accepted plus the messages still held, and exactly that once they settle", async () => {
    const { server, providers, data, customer, price, service, ...rig } = await startRig();
    const [sms] = providers;
    if (sms === undefined) throw new Error("no provider");
    const holdsKey = data.verify.holdsKey(customer);
    const accountKey = data.keys.key("acct", customer);

    const traffic = sendLoops({
      workers: 6,
      customer,
      post: (path, body) => rig.post(service.baseUrl, path, body),
      phone: (_w, n) => `+3362${String(n % 10_000_000).padStart(7, "0")}`,
      retryable: (r) => r.status === 200,
    });

    // The bound, read whenever Redis answers: the charges are the messages the provider accepted
    // plus the held ones (charged, answer not recorded yet), never more. The balance and the
    // holds are read together, and what the provider accepted after, which can only have grown.
    const ahead: string[] = [];
    let samples = 0;
    const sample = async () => {
      while (traffic.running) {
        try {
          const [[, balance], [, held]] = (await data.redis
            .multi()
            .hget(accountKey, "balance_micros")
            .zcard(holdsKey)
            .exec()) as [[null, string], [null, number]];
          const charged = (START_BALANCE - Number(balance)) / price;
          samples++;
          if (charged > sms.accepted.size + held) {
            ahead.push(
              `${String(charged)} charged, ${String(sms.accepted.size)} accepted, ${String(held)} held`,
            );
          }
        } catch {
          // Redis paused or restarting: nothing to read.
        }
        await sleep(100);
      }
    };
    const sampling = sample();

    for (let cycle = 0; cycle < 3; cycle++) {
      await sleep(1_500);
      server.pause();
      await sleep(4_000);
      server.resume();
      await sleep(1_500);
      await server.restart();
    }
    await sleep(1_500);
    await Promise.all([traffic.stop(), sampling]);

    // Every hold settles: by its owner once Redis answers, else by the recovery past its deadline.
    await waitFor(async () => (await data.redis.zcard(holdsKey)) === 0, 30_000);
    expect(ahead).to.deep.equal([]);
    expect(samples).to.be.greaterThan(20);
    expect(traffic.answered).to.be.greaterThan(10);
    expect(sms.refusals).to.be.greaterThan(0);
    const balance = (await data.accounts.get(customer))?.balanceMicros;
    expect(balance).to.equal(START_BALANCE - sms.accepted.size * price);
  });
});
