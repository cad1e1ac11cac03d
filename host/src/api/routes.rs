//! Routes recorded as they are registered: every router of the API is built through [`Routes`],
//! which adds each handler to the axum router and writes its (verb, path) down in the same call.
//! The list is what the OpenAPI document (`docs/openapi.json`) is checked against, so a route
//! cannot be added, renamed or removed without the document following (`api/openapi.rs`).

use axum::Router;
use axum::handler::Handler;
use axum::routing::{delete, get, post, put};

use super::AppState;

/// One route: a verb as OpenAPI spells it (`get`, `post`, `put`, `delete`) and a path in axum's
/// and OpenAPI's common template syntax (`/v1/methods/{name}`). A `get` also answers `HEAD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Route {
    /// The verb, lower case.
    pub verb: &'static str,
    /// The path template.
    pub path: &'static str,
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb.to_ascii_uppercase(), self.path)
    }
}

/// A router under construction, with the list of the routes it serves.
#[derive(Default)]
pub struct Routes {
    router: Router<AppState>,
    table: Vec<Route>,
}

impl Routes {
    /// No routes yet.
    pub fn new() -> Self {
        Routes::default()
    }

    fn add(mut self, route: Route, method: axum::routing::MethodRouter<AppState>) -> Self {
        // axum merges the verbs of one path given in several calls (and panics on a repeat).
        self.router = self.router.route(route.path, method);
        self.table.push(route);
        self
    }

    /// `GET path` (and `HEAD`).
    pub fn get<H, T>(self, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add(Route { verb: "get", path }, get(handler))
    }

    /// `POST path`.
    pub fn post<H, T>(self, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add(Route { verb: "post", path }, post(handler))
    }

    /// `PUT path`.
    pub fn put<H, T>(self, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add(Route { verb: "put", path }, put(handler))
    }

    /// `DELETE path`.
    pub fn delete<H, T>(self, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add(
            Route {
                verb: "delete",
                path,
            },
            delete(handler),
        )
    }

    /// These routes and `other`'s.
    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.table.extend(other.table);
        self
    }

    /// The same routes, the router changed by `f` (a `route_layer` over the routes so far).
    pub fn map(mut self, f: impl FnOnce(Router<AppState>) -> Router<AppState>) -> Self {
        self.router = f(self.router);
        self
    }

    /// The routes served, sorted.
    #[cfg(test)]
    pub fn table(&self) -> Vec<Route> {
        let mut table = self.table.clone();
        table.sort_unstable();
        table
    }

    /// The router.
    pub fn into_router(self) -> Router<AppState> {
        self.router
    }
}
