// The GraphQL documents the clients send, written as a frontend writes them: one fragment for the
// job's fields, spread wherever a job is read, so every read lands on the same cache entry.
import { gql } from "@apollo/client";

const JOB_FIELDS = gql`
  fragment JobFields on Worker {
    id
    status
    automationType
  }
`;

export const WORKERS_PAGE = gql`
  query WorkersPage {
    workers(page: 1, perPage: 5) {
      total
      page
      items {
        ...JobFields
      }
    }
    automations {
      key
      queue
    }
  }
  ${JOB_FIELDS}
`;

export const DISPATCH = gql`
  mutation Dispatch($input: DispatchInput!) {
    dispatchAutomation(input: $input) {
      ...JobFields
      taskId
    }
  }
  ${JOB_FIELDS}
`;

export const ONE_WORKER = gql`
  query OneWorker($id: Int!) {
    worker(id: $id) {
      ...JobFields
    }
  }
  ${JOB_FIELDS}
`;

export const WORKERS_BY_TASK = gql`
  query WorkersByTask($taskId: String!) {
    workers(filter: { taskId: $taskId }) {
      total
      items {
        ...JobFields
      }
    }
  }
  ${JOB_FIELDS}
`;

export const ECHO_EVENTS = gql`
  subscription EchoEvents {
    workerEvents(filter: { automationType: "demo.echo" }) {
      id
      kind
      worker {
        ...JobFields
      }
    }
  }
  ${JOB_FIELDS}
`;

export const TASK_STATUS = gql`
  subscription TaskStatus($taskId: String!) {
    taskStatus(taskId: $taskId) {
      taskId
      state
      worker {
        ...JobFields
      }
    }
  }
  ${JOB_FIELDS}
`;
