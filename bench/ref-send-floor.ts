/**
 * The send floor: the least any service must do to send a code, and nothing more. `node:http`
 * reads the JSON body and checks its number; one Lua script records the send with writes like ours
 * (a row holding the code's hash, the number's window, an event in a stream, each with its expiry);
 * one POST over a keep-alive connection gives the message to the same stand-in provider the
 * service sends to; then it answers. Its CPU per call is what the REST send's is compared with.
 */
import { createHash, randomInt, randomUUID } from "node:crypto";
import { Agent, createServer, request } from "node:http";
import { Redis } from "ioredis";
import { exitWithParent, tell, type SendFloorArgs } from "./child.js";

const RECORD = `
local row, window, events = KEYS[1], KEYS[2], KEYS[3]
local sends = redis.call('INCR', window)
if sends == 1 then redis.call('PEXPIRE', window, 600000) end
if sends > 1000 then return -1 end
redis.call('HSET', row, 'customer_uuid', ARGV[1], 'phone_number', ARGV[2], 'code_hash', ARGV[3],
  'status', 'pending', 'created_at', ARGV[4], 'ip', ARGV[5], 'device_id', ARGV[6])
redis.call('PEXPIRE', row, 604800000)
redis.call('XADD', events, '*', 'type', 'authentication.created', 'at', ARGV[4])
redis.call('PEXPIRE', events, 604800000)
return sends`;

exitWithParent();
const args = JSON.parse(process.argv[2] ?? "{}") as SendFloorArgs;
const redis = new Redis(args.redisUrl);
redis.defineCommand("record", { numberOfKeys: 3, lua: RECORD });
const record = (redis as unknown as { record: (...a: string[]) => Promise<number> }).record.bind(redis);
const agent = new Agent({ keepAlive: true });
const provider = new URL(`${args.providerUrl}/sms`);

function post(payload: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(provider, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
    });
    req.on("error", reject);
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => {
        resolve(res.statusCode ?? 0);
      });
    });
    req.end(payload);
  });
}

async function send(body: string): Promise<[number, string]> {
  let input: Record<string, unknown>;
  try {
    input = JSON.parse(body) as Record<string, unknown>;
  } catch {
    return [400, '{"error":"body is not JSON"}'];
  }
  const phone = input.phone_number;
  if (typeof phone !== "string" || !/^\+[1-9]\d{7,14}$/.test(phone)) return [400, '{"error":"phone_number"}'];
  const uuid = randomUUID();
  const code = String(randomInt(1_000_000)).padStart(6, "0");
  const hash = createHash("sha256").update(code).digest("base64url");
  const sends = await record(
    `floor:{${phone}}:row:${uuid}`,
    `floor:{${phone}}:window`,
    `floor:{${phone}}:events:${uuid}`,
    typeof input.customer_uuid === "string" ? input.customer_uuid : "",
    phone,
    hash,
    String(Date.now()),
    typeof input.ip === "string" ? input.ip : "",
    typeof input.device_id === "string" ? input.device_id : "",
  );
  if (sends < 0) return [200, '{"status":"rate_limited"}'];
  const status = await post(
    JSON.stringify({ to: phone, from: "Ringfence", body: `Your code is ${code}`, reference: uuid }),
  );
  if (status < 200 || status > 299) return [500, '{"error":"provider"}'];
  return [200, JSON.stringify({ authentication_uuid: uuid, status: "pending" })];
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    send(Buffer.concat(chunks).toString("utf8")).then(
      ([status, answer]) => res.writeHead(status, { "content-type": "application/json" }).end(answer),
      () => res.writeHead(500).end(),
    );
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  const addr = server.address();
  tell({ ready: true, port: typeof addr === "object" && addr !== null ? addr.port : 0 });
});
