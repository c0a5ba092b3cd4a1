/**
 * The gRPC floor: a bare grpc-js server with our CreateToken method that reads HTTP Basic from
 * metadata, compares the secret and signs a token like ours with jose, no Redis.
 */
import { timingSafeEqual } from "node:crypto";
import { Server, ServerCredentials, status, type UntypedServiceImplementation } from "@grpc/grpc-js";
import { generateKeyPair } from "jose";
import { OAuthServiceService, type CreateTokenRequest } from "../src/gen/ringfence/oauth/v1/oauth_service.js";
import { referenceArgs, exitWithParent, tell } from "./child.js";
import { readBasic, signToken } from "./token-claims.js";
import type { sendUnaryData, ServerUnaryCall } from "@grpc/grpc-js";

exitWithParent();
const args = referenceArgs();
const { privateKey } = await generateKeyPair("ES256");
const secret = Buffer.from(args.clientSecret);

const implementation: UntypedServiceImplementation = {
  createToken(call: ServerUnaryCall<CreateTokenRequest, unknown>, callback: sendUnaryData<unknown>) {
    const form = new URLSearchParams(Buffer.from(call.request.httpBody?.data ?? []).toString("utf8"));
    const header = call.metadata.get("authorization")[0];
    const basic = readBasic(typeof header === "string" ? header : undefined);
    const given = Buffer.from(basic?.secret ?? "");
    const ok =
      form.get("grant_type") === "client_credentials" &&
      basic?.id === args.clientId &&
      given.length === secret.length &&
      timingSafeEqual(given, secret);
    if (!ok) {
      callback({ code: status.UNAUTHENTICATED, details: "invalid_client" });
      return;
    }
    const scope = form.get("scope") ?? "";
    signToken({ key: privateKey, kid: "floor", issuer: "http://127.0.0.1" }, args.clientId, scope).then(
      (accessToken) => {
        callback(null, { accessToken, tokenType: "Bearer", expiresIn: 3600, scope });
      },
      (err: unknown) => {
        callback({ code: status.INTERNAL, details: String(err) });
      },
    );
  },
};

const server = new Server();
server.addService(OAuthServiceService, implementation);
server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, port) => {
  if (err !== null) throw err;
  tell({ ready: true, port });
});
