// The documents tests/project/relay/runtime.js runs, compiled by relay-compiler with the README's
// schemaConfig (tests/project/test_client_conventions.py); never executed: runtime.js loads the
// compiled artifacts.
import {graphql} from 'relay-runtime';

graphql`
  query RuntimeRosterQuery($classId: ID!, $count: Int!) {
    class(id: $classId) {
      ...RuntimeRoster_class @arguments(count: $count)
    }
  }
`;

graphql`
  fragment RuntimeRoster_class on Class
  @refetchable(queryName: "RuntimeRosterPaginationQuery")
  @argumentDefinitions(count: {type: "Int!"}, cursor: {type: "String"}) {
    subject
    students(first: $count, after: $cursor) @connection(key: "RuntimeRoster_students") {
      edges {
        node {
          __id
          id
          nodeId
          name
        }
      }
    }
  }
`;

graphql`
  query RuntimeNodeQuery($id: ID!) {
    node(id: $id) {
      __id
      ... on Student {
        id
        name
      }
    }
  }
`;

graphql`
  query RuntimeTwinsQuery($id: ID!) {
    student(id: $id) {
      __id
      id
      name
    }
    teacher(id: $id) {
      __id
      id
      name
    }
  }
`;
