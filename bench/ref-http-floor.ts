/**
 * The REST floor: `node:http` and jose, no Redis. It reads the form and HTTP Basic, compares the
 * secret, signs a token like ours and answers: the least any token endpoint must do.
 */
import { createServer } from "node:http";
import { timingSafeEqual } from "node:crypto";
import { generateKeyPair } from "jose";
import { referenceArgs, exitWithParent, tell } from "./child.js";
import { readBasic, signToken } from "./token-claims.js";

exitWithParent();
const args = referenceArgs();
const { privateKey } = await generateKeyPair("ES256");
const secret = Buffer.from(args.clientSecret);

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
    const basic = readBasic(req.headers.authorization);
    const given = Buffer.from(basic?.secret ?? "");
    const ok =
      req.method === "POST" &&
      form.get("grant_type") === "client_credentials" &&
      basic?.id === args.clientId &&
      given.length === secret.length &&
      timingSafeEqual(given, secret);
    if (!ok) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"error":"invalid_client"}');
      return;
    }
    const scope = form.get("scope") ?? "";
    signToken({ key: privateKey, kid: "floor", issuer: "http://127.0.0.1" }, args.clientId, scope).then(
      (token) => {
        res
          .writeHead(200, { "content-type": "application/json", "cache-control": "no-store" })
          .end(JSON.stringify({ access_token: token, token_type: "Bearer", expires_in: 3600, scope }));
      },
      () => res.writeHead(500).end(),
    );
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => {
  const addr = server.address();
  tell({ ready: true, port: typeof addr === "object" && addr !== null ? addr.port : 0 });
});
