/**
 * The node-oidc-provider reference: panva's certified OpenID provider with its default memory
 * adapter, serving client_credentials with ES256 JWT access tokens (a resource indicator's
 * `accessTokenFormat: "jwt"`), the client authenticating with HTTP Basic like ours.
 */
import { createServer } from "node:http";
import { exportJWK, generateKeyPair } from "jose";
import Provider from "oidc-provider";
import { referenceArgs, exitWithParent, tell } from "./child.js";

exitWithParent();
const args = referenceArgs();
const { privateKey } = await generateKeyPair("ES256", { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: "oidc", alg: "ES256", use: "sig" };
const resource = "https://api.bench.local";

const server = createServer();
server.keepAliveTimeout = 60_000;
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const addr = server.address();
const port = typeof addr === "object" && addr !== null ? addr.port : 0;

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [
    {
      client_id: args.clientId,
      client_secret: args.clientSecret,
      grant_types: ["client_credentials"],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: "client_secret_basic",
      id_token_signed_response_alg: "ES256",
      scope: args.scope,
    },
  ],
  jwks: { keys: [jwk] },
  ttl: { ClientCredentials: 3600 },
  scopes: [args.scope],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: args.scope,
        audience: resource,
        accessTokenTTL: 3600,
        accessTokenFormat: "jwt",
        jwt: { sign: { alg: "ES256" } },
      }),
    },
  },
});
provider.on("server_error", (_ctx, err) => {
  process.stderr.write(`oidc-provider: ${String(err)}\n`);
});
server.on("request", provider.callback());
tell({ ready: true, port });
