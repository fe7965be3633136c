//! The gRPC side of the one port: roost.v1 services, grpc.health.v1, reflection (v1 and
//! v1alpha, as grpcurl uses them) and gRPC-web over HTTP/1.1.

use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use roost_proto::v1::{GetHealthRequest, GetVersionRequest, HealthStatus, system_service_client::SystemServiceClient};
use roost_tests::{Backend, TestServer, each_backend};
use tonic::Code;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient};
use tonic_reflection::pb::{v1, v1alpha};

each_backend!(
    system_service_answers_over_grpc,
    grpc_health_is_serving,
    reflection_v1_lists_the_services,
    reflection_v1alpha_lists_the_services,
    grpc_web_reaches_the_same_service,
    unknown_methods_are_unimplemented
);

/// Every service `proto/roost/v1` declares.
const ROOST_SERVICES: &[&str] = &[
    "roost.v1.AccountService",
    "roost.v1.AgentService",
    "roost.v1.IngestService",
    "roost.v1.QueryService",
    "roost.v1.StreamService",
    "roost.v1.SystemService",
    "roost.v1.UpdateService",
];

async fn system_service_answers_over_grpc(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut client = SystemServiceClient::new(server.channel().await);
    let version = client.get_version(GetVersionRequest {}).await.unwrap().into_inner();
    assert_eq!(version.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(version.contracts["query"], "q/1");
    let health = client.get_health(GetHealthRequest {}).await.unwrap().into_inner();
    assert_eq!(health.status(), HealthStatus::Ok);
    assert_eq!(health.database.unwrap().backend, backend.name());
}

async fn grpc_health_is_serving(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut health = HealthClient::new(server.channel().await);
    for service in ["", "roost.v1.SystemService"] {
        let resp = health.check(HealthCheckRequest { service: service.into() }).await.unwrap().into_inner();
        assert_eq!(resp.status(), ServingStatus::Serving, "{service:?}");
    }
    let err = health.check(HealthCheckRequest { service: "no.such.Service".into() }).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

/// Asks a reflection service (module `v1` or `v1alpha`, same messages) to list services.
macro_rules! list_services {
    ($version:ident, $channel:expr) => {{
        use $version::{
            ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let mut client = ServerReflectionClient::new($channel);
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut stream = client.server_reflection_info(tokio_stream::once(request)).await.unwrap().into_inner();
        let resp = stream.message().await.unwrap().unwrap();
        let Some(MessageResponse::ListServicesResponse(list)) = resp.message_response else { panic!("{resp:?}") };
        list.service.into_iter().map(|s| s.name).collect::<Vec<String>>()
    }};
}

async fn reflection_v1_lists_the_services(backend: Backend) {
    let server = TestServer::start(backend).await;
    assert_lists_services(&list_services!(v1, server.channel().await));
}

async fn reflection_v1alpha_lists_the_services(backend: Backend) {
    let server = TestServer::start(backend).await;
    assert_lists_services(&list_services!(v1alpha, server.channel().await));
}

fn assert_lists_services(names: &[String]) {
    for service in ROOST_SERVICES.iter().chain(&["grpc.health.v1.Health"]) {
        assert!(names.iter().any(|n| n == service), "{service} missing from {names:?}");
    }
}

async fn grpc_web_reaches_the_same_service(backend: Backend) {
    let server = TestServer::start(backend).await;
    // An HTTP/1.1-only client, as a browser's fetch would be.
    let http1 = Client::builder(TokioExecutor::new()).http2_only(false).build_http();
    let web = tower::ServiceBuilder::new().layer(tonic_web::GrpcWebClientLayer::new()).service(http1);
    let mut client = SystemServiceClient::with_origin(web, server.url("").parse().unwrap());
    let version = client.get_version(GetVersionRequest {}).await.unwrap().into_inner();
    assert_eq!(version.version, env!("CARGO_PKG_VERSION"));
}

async fn unknown_methods_are_unimplemented(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/roost.v1.NoSuchService/Nothing");
    let codec = tonic_prost::ProstCodec::<GetVersionRequest, GetVersionRequest>::default();
    let err = grpc.unary(tonic::Request::new(GetVersionRequest {}), path, codec).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented, "{err:?}");
}
