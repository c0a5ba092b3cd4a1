import type { WireError } from "../errors.js";
import { Status } from "../gen/google/rpc/status.js";
import { BadRequest, ErrorInfo, Help, RequestInfo, RetryInfo } from "../gen/google/rpc/error_details.js";

/** The trailer gRPC clients read a `google.rpc.Status` from (grpc-status-details-bin). */
export const STATUS_DETAILS_KEY = "grpc-status-details-bin";
/** ErrorInfo.domain: the service that defines the reasons. */
export const ERROR_DOMAIN = "ringfence.dev";

function pack<T>(type: string, codec: { encode(m: T): { finish(): Uint8Array } }, message: T) {
  return {
    typeUrl: `type.googleapis.com/google.rpc.${type}`,
    value: Buffer.from(codec.encode(message).finish()),
  };
}

/**
 * An error as AIP-193 has gRPC clients read it: a `google.rpc.Status` whose details hold an
 * ErrorInfo (reason = the stable error code, domain, metadata), the request id (RequestInfo),
 * the field at fault (BadRequest), when to try again (RetryInfo, from Retry-After) and the V1
 * error's documentation (Help).
 */
export function statusDetails(error: WireError, requestId: string): Buffer {
  const retryAfter = error.headers["retry-after"];
  const field = error.details.field;
  const metadata: Record<string, string> = {};
  if (field !== undefined) metadata.field = field;
  if (retryAfter !== undefined) metadata.retry_after = retryAfter;
  const details = [
    pack("ErrorInfo", ErrorInfo, { reason: error.code, domain: ERROR_DOMAIN, metadata }),
    pack("RequestInfo", RequestInfo, { requestId, servingData: "" }),
  ];
  if (field !== undefined) {
    details.push(
      pack("BadRequest", BadRequest, { fieldViolations: [{ field, description: error.message }] }),
    );
  }
  if (retryAfter !== undefined && /^\d+$/.test(retryAfter)) {
    details.push(pack("RetryInfo", RetryInfo, { retryDelay: { seconds: Number(retryAfter), nanos: 0 } }));
  }
  const docUrl = error.body.doc_url;
  if (typeof docUrl === "string") {
    details.push(pack("Help", Help, { links: [{ description: `the ${error.code} error`, url: docUrl }] }));
  }
  return Buffer.from(Status.encode({ code: error.grpcStatus, message: error.message, details }).finish());
}
