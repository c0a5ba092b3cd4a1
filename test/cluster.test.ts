import { expect } from "chai";
import { LookupServiceClient } from "../src/gen/ringfence/lookup/v1/lookup_service.js";
import { startRedisCluster, type RedisCluster } from "./support/redis.js";
import { insecure, metadata, startTestApp, unary, type TestApp } from "./support/app.js";

describe("on a Redis Cluster", () => {
  let cluster: RedisCluster;
  let app: TestApp;

  before(async function () {
    this.timeout(60_000);
    cluster = await startRedisCluster();
    app = await startTestApp({ REDIS_CLUSTER_NODES: cluster.nodes });
  });
  after(async () => {
    await app.stop();
    await cluster.stop();
  });

  it("keeps accounts, runs their scripts and serves lookups over REST and gRPC", async () => {
    const { accounts, lookupData } = app.registry;
    const made = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        accounts.create({
          name: `C${i}`,
          balanceMicros: 0,
          spendingLimitMicros: 0,
          features: ["cnam"],
          regions: [],
        }),
      ),
    );
    // Scripts on keys of many slots: each must keep to its own hash tag.
    for (const { account } of made) {
      expect(await accounts.credit(account.customerUuid, 1_500_000)).to.equal(1_500_000);
      expect(await accounts.setStatus(account.customerUuid, "active")).to.equal(true);
    }
    await lookupData.put(
      new Map([
        ["+33612345678", { callerName: "Cluster Name" }],
        ["+33612345679", { numberPorted: true }],
        ["+14155552671", { temporaryPhoneNumber: true }],
      ]),
    );
    const first = made[0];
    if (first === undefined) throw new Error("no account");
    const headers = { "customer-uuid": first.account.customerUuid, "x-api-key": first.apiKey };
    const res = await fetch(`${app.baseUrl}/v1/lookup/+33612345678?type=cnam`, { headers });
    expect(res.status).to.equal(200);
    expect(await res.json()).to.include({ country_code: "FR", mcc: "208", caller_name: "Cluster Name" });

    const client = new LookupServiceClient(app.grpcAddress, insecure);
    const { err, res: answer } = await unary(
      client.lookupPhoneNumber.bind(client),
      { phoneNumber: "+14155552671", type: [] },
      metadata(headers),
    );
    client.close();
    expect(err).to.equal(null);
    expect(answer).to.include({ countryCode: "US", temporaryPhoneNumber: true });
  });
});
