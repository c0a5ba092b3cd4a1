import { credentials, Metadata, type Client, type ServiceError } from "@grpc/grpc-js";
import { OAuthServiceClient } from "../src/gen/ringfence/oauth/v1/oauth_service.js";
import { LookupServiceClient } from "../src/gen/ringfence/lookup/v1/lookup_service.js";
import { basicAuth, TOKEN_FORM, type Fixture } from "./calls.js";

export type GrpcCall = "token" | "lookup";

/** One channel (its own HTTP/2 connection) able to make either call. */
export interface GrpcChannel {
  /** Connects, so that the first call does not pay for it. */
  ready(): Promise<void>;
  call(i: number): Promise<void>;
  close(): void;
}

/**
 * A channel to `address` for `call`. Each has its own subchannel pool, so that several channels
 * really are several connections (and reach several workers of a node:cluster server).
 */
export function grpcChannel(address: string, call: GrpcCall, f: Fixture): GrpcChannel {
  const options = { "grpc.use_local_subchannel_pool": 1 };
  if (call === "token") {
    const client = new OAuthServiceClient(address, credentials.createInsecure(), options);
    const md = new Metadata();
    md.set("authorization", basicAuth(f.clientId, f.clientSecret));
    const request = {
      httpBody: {
        contentType: "application/x-www-form-urlencoded",
        data: Buffer.from(TOKEN_FORM(f.scope)),
        extensions: [],
      },
    };
    return {
      ready: () => ready(client),
      call: () =>
        new Promise((resolve, reject) => {
          client.createToken(request, md, (err: ServiceError | null) => {
            if (err === null) resolve();
            else reject(err);
          });
        }),
      close: () => {
        client.close();
      },
    };
  }
  const client = new LookupServiceClient(address, credentials.createInsecure(), options);
  const md = new Metadata();
  md.set("customer-uuid", f.customerUuid);
  md.set("x-api-key", f.apiKey);
  return {
    ready: () => ready(client),
    call: (i) =>
      new Promise((resolve, reject) => {
        const phoneNumber = f.lookupNumbers[i % f.lookupNumbers.length] ?? "";
        client.lookupPhoneNumber({ phoneNumber, type: [] }, md, (err: ServiceError | null) => {
          if (err === null) resolve();
          else reject(err);
        });
      }),
    close: () => {
      client.close();
    },
  };
}

function ready(client: Client): Promise<void> {
  return new Promise((resolve, reject) => {
    client.waitForReady(Date.now() + 10_000, (err) => {
      if (err === undefined) resolve();
      else reject(err);
    });
  });
}
