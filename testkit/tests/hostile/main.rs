//! Tests of the hostile server through a plain TCP client: one module per kind of hostility.

mod client;
mod echo;
mod endless;
mod escape;
mod flood;
mod lifecycle;
mod messages;
mod modes;
mod responses;
mod scripted;
mod slow;
