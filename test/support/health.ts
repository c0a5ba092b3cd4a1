import {
  loadPackageDefinition,
  type ChannelCredentials,
  type Client,
  type ServiceError,
} from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { protoPath } from "grpc-health-check";

type HealthCheck = (
  req: { service: string },
  cb: (err: ServiceError | null, res?: { status: string }) => void,
) => void;

interface HealthClientType extends Client {
  check: HealthCheck;
}

const pkg = loadPackageDefinition(loadSync(protoPath, { enums: String })) as unknown as {
  grpc: { health: { v1: { Health: new (address: string, creds: ChannelCredentials) => HealthClientType } } };
};

/** A client of the standard gRPC health service (grpc.health.v1.Health). */
export const HealthClient = pkg.grpc.health.v1.Health;
