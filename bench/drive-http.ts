/**
 * The REST load driver, a process of its own: autocannon with `connections` keep-alive
 * connections, each sending its next request as soon as the previous one is answered, for
 * `seconds`. Latencies are kept at full resolution (autocannon's own histogram rounds to 1 ms).
 */
import autocannon from "autocannon";
import { answerStatus, authUuidOf, isSend, restRequest, type RestPlan } from "./calls.js";
import { exitWithParent, tell } from "./child.js";
import { Latencies, type LoadResult } from "./stats.js";

export interface HttpLoad {
  baseUrl: string;
  plan: RestPlan;
  connections: number;
  seconds: number;
}

exitWithParent();
// The bench sends the load once told that this process listens (an earlier message would be lost).
process.once("message", (load: HttpLoad) => {
  void drive(load).then((result) => {
    tell({ result });
  });
});
tell({ ready: true });

async function drive({ baseUrl, plan, connections, seconds }: HttpLoad): Promise<LoadResult> {
  const latencies = new Latencies();
  const statuses: Record<string, number> = {};
  const errors: string[] = [];
  const authUuids: string[] = [];
  const readsBody =
    isSend(plan.call) || plan.call === "check" || plan.call === "v2check" || plan.call === "introspect";
  let issued = 0;
  let ok = 0;
  let failed = 0;
  const started = process.hrtime.bigint();
  let finished!: (err: Error | null) => void;
  const done = new Promise<Error | null>((resolve) => (finished = resolve));
  const instance = autocannon(
    {
      url: baseUrl,
      connections,
      duration: seconds,
      timeout: 10,
      requests: [
        {
          setupRequest: (req) => ({ ...req, ...restRequest(plan, issued++) }),
          ...(readsBody
            ? {
                onResponse: (status: number, body: string) => {
                  const answer = answerStatus(status, body);
                  statuses[answer] = (statuses[answer] ?? 0) + 1;
                  const uuid = plan.call === "send" && answer === "pending" ? authUuidOf(body) : undefined;
                  if (uuid !== undefined) authUuids.push(uuid);
                },
              }
            : {}),
        },
      ],
    },
    (err: unknown) => {
      finished(
        err === null || err === undefined
          ? null
          : err instanceof Error
            ? err
            : new Error(JSON.stringify(err)),
      );
    },
  );
  // autocannon emits (client, statusCode, resBytes, responseTime); its types leave out the client.
  instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    latencies.add(responseTime);
    if (statusCode >= 200 && statusCode < 300) ok++;
    else {
      failed++;
      if (!readsBody) statuses[String(statusCode)] = (statuses[String(statusCode)] ?? 0) + 1;
      if (errors.length < 5) errors.push(`HTTP ${statusCode}`);
    }
  });
  instance.on("reqError", (err: Error) => {
    failed++;
    if (errors.length < 5) errors.push(err.message);
  });
  const failure = await done;
  if (failure !== null) throw failure;
  const secondsTaken = Number(process.hrtime.bigint() - started) / 1e9;
  const [p50 = NaN, p99 = NaN] = latencies.percentiles(50, 99);
  if (!readsBody && ok > 0) statuses["2xx"] = ok;
  return {
    ok,
    failed,
    seconds: secondsTaken,
    rps: ok / secondsTaken,
    p50,
    p99,
    statuses,
    issued,
    ...(plan.call === "send" ? { authUuids } : {}),
    errors,
  };
}
