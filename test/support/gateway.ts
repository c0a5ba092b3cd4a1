import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";
import { fromBinary, toBinary, type DescMessage, type DescService, type Message } from "@bufbuild/protobuf";
import { loadContract, type Contract } from "../../src/rpc/contract.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Builds test/fixtures/proto with buf and loads it as the gateway does. buf only lets a module path
 * name a folder inside the directory it builds, so the build runs from the repository root with a
 * two-module workspace: the fixture, and proto/ for google/api/*.proto (buf brings
 * google/protobuf/*.proto itself). `--path` keeps the real services out of the descriptor.
 */
export function buildFixtureContract(): Contract {
  const dir = mkdtempSync(join(tmpdir(), "gateway-fixture-"));
  try {
    const out = join(dir, "fixture.binpb");
    const workspace = { version: "v2", modules: [{ path: "proto" }, { path: "test/fixtures/proto" }] };
    execFileSync(
      join(ROOT, "node_modules/.bin/buf"),
      [
        "build",
        ".",
        "--config",
        JSON.stringify(workspace),
        "--path",
        "test/fixtures/proto/fixture",
        "-o",
        out,
      ],
      { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] },
    );
    return loadContract(readFileSync(out));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A grpc-js service definition made from the descriptor, keyed like ts-proto's (lower camel case),
 * whose messages are @bufbuild/protobuf messages.
 */
export function serviceDefinition(service: DescService): ServiceDefinition {
  const definition: Record<string, MethodDefinition<Message, Message>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      originalName: method.localName,
      requestSerialize: (message) => Buffer.from(toBinary(method.input, message)),
      requestDeserialize: (bytes) => fromBinary(method.input, bytes),
      responseSerialize: (message) => Buffer.from(toBinary(method.output, message)),
      responseDeserialize: (bytes) => fromBinary(method.output, bytes),
    };
  }
  return definition;
}

export function messageType(contract: Contract, name: string): DescMessage {
  const desc = contract.registry.getMessage(`fixture.echo.v1.${name}`) ?? contract.registry.getMessage(name);
  if (desc === undefined) throw new Error(`${name} is not in the fixture descriptor`);
  return desc;
}

export function serviceType(contract: Contract, name: string): DescService {
  const desc = contract.registry.getService(`fixture.echo.v1.${name}`);
  if (desc === undefined) throw new Error(`${name} is not in the fixture descriptor`);
  return desc;
}
