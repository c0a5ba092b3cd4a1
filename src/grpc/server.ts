import {
  Metadata,
  type MethodDefinition,
  Server,
  ServerCredentials,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServiceDefinition,
  type ServiceError,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { STATUS_DETAILS_KEY, statusDetails } from "./status-details.js";
import { loadFileDescriptorSetFromBuffer, loadSync } from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { HealthImplementation, protoPath as healthProtoPath, type ServingStatus } from "grpc-health-check";
import {
  HTTP_BODY_MARKER,
  HTTP_STATUS_MARKER,
  invoke,
  UndecodableRequest,
  type InvokeDeps,
  type Outcome,
  type ServiceBinding,
} from "../rpc/binding.js";
import { REQUEST_ID_HEADER, requestIdOf } from "../observability/calls.js";
import { clip } from "../errors.js";
import type { Logger } from "../log.js";
import { clientOf, peerAddress } from "../net/cidr.js";
import type { BlockList } from "node:net";

export interface GrpcDeps extends InvokeDeps {
  log: Logger;
  docsUrl: string;
  /** The FileDescriptorSet that `buf build` makes, for server reflection. */
  descriptor: Buffer;
  /** gRPC peers (Envoy) whose `x-forwarded-for` names the client (TRUSTED_PROXY_CIDRS). */
  trustedProxies: BlockList;
  /** The largest request message accepted (MAX_BODY_BYTES, like REST); above it RESOURCE_EXHAUSTED. */
  maxReceiveBytes: number;
}

export interface GrpcTransport {
  server: Server;
  port: number;
  setServing(status: ServingStatus): void;
}

/** Serves the bindings over gRPC, with the health service and server reflection. */
export async function startGrpc(
  bindings: readonly ServiceBinding[],
  listen: { host: string; port: number },
  deps: GrpcDeps,
): Promise<GrpcTransport> {
  // grpc-js itself refuses a larger message with RESOURCE_EXHAUSTED before reading it.
  const server = new Server({ "grpc.max_receive_message_length": deps.maxReceiveBytes });
  for (const binding of bindings) {
    server.addService(decodingInHandler(binding.definition), implement(binding, deps));
  }

  const names = ["", ...bindings.map((b) => b.serviceName)];
  const health = new HealthImplementation(Object.fromEntries(names.map((n) => [n, "NOT_SERVING"])));
  health.addToServer(server);
  // Reflection describes what this server answers: the served services and health.
  const described = { ...loadFileDescriptorSetFromBuffer(deps.descriptor), ...loadSync(healthProtoPath) };
  const reflected = [...bindings.map((b) => b.serviceName), "grpc.health.v1.Health"];
  new ReflectionService(described, { services: reflected }).addToServer(server);

  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(
      `${hostForUri(listen.host)}:${listen.port}`,
      ServerCredentials.createInsecure(),
      (err, p) => {
        if (err) reject(err);
        else resolve(p);
      },
    );
  });
  return {
    server,
    port,
    setServing: (status) => {
      for (const n of names) health.setStatus(n, status);
    },
  };
}

function implement(binding: ServiceBinding, deps: GrpcDeps): UntypedServiceImplementation {
  const impl: UntypedServiceImplementation = {};
  for (const method of Object.keys(binding.definition)) {
    impl[method] = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      const startedAt = process.hrtime.bigint();
      const incoming = (name: string) => {
        const v = call.metadata.get(name)[0];
        return v === undefined ? undefined : v.toString();
      };
      const client = clientOf(peerAddress(call.getPeer()), incoming("x-forwarded-for"), deps.trustedProxies);
      const requestId = requestIdOf(incoming(REQUEST_ID_HEADER));
      const deadline = call.getDeadline();
      const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
      const received = {
        transport: "grpc" as const,
        header: incoming,
        clientAddress: client,
        requestId,
        startedAt,
        ...(Number.isFinite(deadlineMs) ? { deadlineMs } : {}),
      };
      const respond = (outcome: Outcome) => {
        if (outcome.ok) {
          if (Object.keys(outcome.headers).length > 0) call.sendMetadata(toMetadata(outcome.headers));
          callback(null, outcome.response);
          return;
        }
        // Nothing was sent yet, so grpc-js answers trailers-only: these become HTTP headers in Envoy.
        const { error } = outcome;
        const metadata = toMetadata({
          ...outcome.headers,
          [HTTP_STATUS_MARKER]: String(error.httpStatus),
          [HTTP_BODY_MARKER]: asciiJson(error.body),
        });
        metadata.set(STATUS_DETAILS_KEY, statusDetails(error, requestId));
        const failure: Partial<ServiceError> = { code: error.grpcStatus, details: error.message, metadata };
        callback(failure);
      };
      // A call answered at once is answered at once: no promise before the response is written.
      const outcome = invoke(binding, method, call.request, received, deps);
      if (outcome instanceof Promise) void outcome.then(respond);
      else respond(outcome);
    };
  }
  return impl;
}

/**
 * The definition with each request deserializer made total: grpc-js answers a throwing one with
 * INTERNAL, so a decode failure becomes an `UndecodableRequest` that `invoke` refuses as
 * bad_request in the method's dialect.
 */
function decodingInHandler(definition: ServiceDefinition): ServiceDefinition {
  const wrapped: Record<string, MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(definition)) {
    const m = method as MethodDefinition<unknown, unknown>;
    wrapped[name] = {
      ...m,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return m.requestDeserialize(bytes);
        } catch (err) {
          return new UndecodableRequest(clip(err instanceof Error ? err.message : String(err)));
        }
      },
    };
  }
  return wrapped;
}

function toMetadata(headers: Record<string, string>): Metadata {
  const md = new Metadata();
  for (const [k, v] of Object.entries(headers)) md.set(k, v);
  return md;
}

/** grpc-js drops metadata values with non-printable characters, so the body is kept to ASCII. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

function hostForUri(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}
