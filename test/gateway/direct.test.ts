import { expect } from "chai";
import { randomBytes } from "node:crypto";
import {
  create,
  fromBinary,
  fromJson,
  ScalarType,
  toBinary,
  toJson,
  type DescField,
  type DescMessage,
  type Message,
} from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import type { MethodDefinition } from "@grpc/grpc-js";
import { asMessage, httpBodyField, httpBodyRequest, sameShape } from "../../src/gateway/direct.js";
import { loadContract } from "../../src/rpc/contract.js";
import { DeliveryReportServiceService } from "../../src/gen/ringfence/delivery/v1/delivery_report_service.js";
import { WhatsAppWebhookServiceService } from "../../src/gen/ringfence/delivery/v1/whatsapp_webhook_service.js";
import { OAuthServiceService } from "../../src/gen/ringfence/oauth/v1/oauth_service.js";
import { StepUpServiceService } from "../../src/gen/ringfence/stepup/v1/stepup_service.js";
import { LookupServiceService as LookupV1 } from "../../src/gen/ringfence/lookup/v1/lookup_service.js";
import { LookupServiceService as LookupV2 } from "../../src/gen/ringfence/lookup/v2/lookup_service.js";
import { SessionServiceService } from "../../src/gen/ringfence/session/v1/session_service.js";
import { VerifyServiceService } from "../../src/gen/ringfence/verify/v1/verify_service.js";
import { FraudServiceService } from "../../src/gen/ringfence/verify/v2/fraud_service.js";
import { VerificationServiceService } from "../../src/gen/ringfence/verify/v2/verification_service.js";

const SERVICES = [
  OAuthServiceService,
  StepUpServiceService,
  LookupV1,
  LookupV2,
  SessionServiceService,
  VerifyServiceService,
  FraudServiceService,
  VerificationServiceService,
  DeliveryReportServiceService,
  WhatsAppWebhookServiceService,
];
const JSON_OPTIONS = { useProtoFieldName: true, alwaysEmitImplicit: true };
const SAMPLES = 40;

const contract = loadContract();
const methods = SERVICES.flatMap((service) =>
  Object.values(service).map((definition) => {
    const def = definition as MethodDefinition<unknown, unknown>;
    const rpc = contract.methods.get(def.path);
    if (rpc === undefined) throw new Error(`${def.path} is not in the descriptor`);
    return { def, rpc };
  }),
);

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T;
const int = (min: number, max: number) => min + Math.floor(Math.random() * (max - min + 1));
const STRINGS = ["", "a", 'quote " and \\ back', "ünïcødé ✓", "line\nbreak", "x".repeat(300)];

function scalarValue(scalar: ScalarType): unknown {
  switch (scalar) {
    case ScalarType.STRING:
      return pick(STRINGS) + (Math.random() < 0.5 ? String(int(0, 1e6)) : "");
    case ScalarType.BOOL:
      return Math.random() < 0.5;
    case ScalarType.BYTES:
      return new Uint8Array(randomBytes(int(0, 40)));
    case ScalarType.DOUBLE:
      return pick([0, -0, 1.5, -2.25, 1e21, 123456.789, Math.random() * 1e6]);
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return int(0, 2 ** 32 - 1);
    default:
      return int(-(2 ** 31), 2 ** 31 - 1);
  }
}

function fieldValue(field: DescField, depth: number): unknown {
  switch (field.fieldKind) {
    case "scalar":
      return scalarValue(field.scalar);
    case "enum":
      return pick(field.enum.values).number;
    case "message":
      return depth > 3 || Math.random() < 0.3 ? undefined : randomMessage(field.message, depth + 1);
    case "list":
      return Array.from({ length: int(0, 3) }, () =>
        field.listKind === "scalar"
          ? scalarValue(field.scalar)
          : field.listKind === "enum"
            ? pick(field.enum.values).number
            : randomMessage(field.message, depth + 1),
      );
    case "map":
      throw new Error("maps are not sameShape");
  }
}

/** A @bufbuild message of `desc` with random values; explicit-presence fields set half the time. */
function randomMessage(desc: DescMessage, depth = 0): Message {
  const init: Record<string, unknown> = {};
  for (const field of desc.fields) {
    const explicit = field.fieldKind === "scalar" && field.presence !== FeatureSet_FieldPresence.IMPLICIT;
    if (explicit && Math.random() < 0.5) continue;
    const value = fieldValue(field, depth);
    if (value !== undefined) init[field.localName] = value;
  }
  return create(desc, init as never);
}

describe("gateway shortcuts: the same message and the same JSON by a shorter road", () => {
  const direct = methods.filter(({ rpc }) => sameShape(rpc.output));

  it("answers the token endpoint and most methods without the binary trip; maps, oneofs, well-known types and floats keep it", () => {
    const names = direct.map(({ rpc }) => rpc.output.typeName);
    expect(names).to.include("ringfence.oauth.v1.CreateTokenResponse");
    expect(direct.length).to.be.greaterThan(methods.length / 2);
    const longWay = methods.filter(({ rpc }) => !sameShape(rpc.output)).map(({ rpc }) => rpc.output.typeName);
    // CreateClientResponse holds a google.protobuf.Struct (jwks).
    expect(longWay).to.include("ringfence.oauth.v1.CreateClientResponse");
  });

  it("turns each such answer into the JSON, member for member and in order, that the binary trip gives", () => {
    for (const { def, rpc } of direct) {
      for (let i = 0; i < SAMPLES; i++) {
        const sample = randomMessage(rpc.output);
        // The ts-proto object a handler would answer with.
        const answer = def.responseDeserialize(Buffer.from(toBinary(rpc.output, sample))) as object;
        const longWay = toJson(
          rpc.output,
          fromBinary(rpc.output, def.responseSerialize(answer)),
          JSON_OPTIONS,
        );
        const shortWay = toJson(
          rpc.output,
          asMessage(rpc.output, answer) as unknown as Message,
          JSON_OPTIONS,
        );
        expect(JSON.stringify(shortWay), `${def.path} answer ${i}`).to.equal(JSON.stringify(longWay));
      }
    }
  });

  it("makes the request of a route whose body is a google.api.HttpBody as the JSON road does", () => {
    const bodies = methods.flatMap(({ def, rpc }) =>
      rpc.http.flatMap((http) => {
        const field = httpBodyField(rpc.input, http.body);
        return field === undefined ? [] : [{ def, rpc, field, body: http.body }];
      }),
    );
    expect(bodies.map(({ def }) => def.path)).to.include("/ringfence.oauth.v1.OAuthService/CreateToken");
    for (const { def, rpc, field, body } of bodies) {
      for (const [contentType, data] of [
        ["application/x-www-form-urlencoded", Buffer.from("grant_type=client_credentials&scope=a%20b")],
        ["application/x-www-form-urlencoded; charset=utf-8", randomBytes(100)],
        ["", Buffer.alloc(0)],
        ["text/plain", Buffer.alloc(0)],
        ["", Buffer.from("x")],
      ] as const) {
        const json = { [body]: { content_type: contentType, data: data.toString("base64") } };
        const viaJson = def.requestDeserialize(
          Buffer.from(toBinary(rpc.input, fromJson(rpc.input, json, { ignoreUnknownFields: false }))),
        );
        const direct = def.requestDeserialize(Buffer.from(httpBodyRequest(field, contentType, data)));
        expect(direct, `${def.path} ${contentType}`).to.deep.equal(viaJson);
      }
    }
  });
});
